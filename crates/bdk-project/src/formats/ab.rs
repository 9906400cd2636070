//! `ab.toml` (experiment `ab`) and `ab/<id>.toml`: live A/B experiments. Sessions are enrolled
//! in an arm at creation (`ab.assigned`); an arm may swap the model or append instructions.

use std::collections::HashSet;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::{AbArm, AbDef};
use crate::parse;
use crate::source::SourceFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AbFile {
    description: Option<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    arms: Vec<ArmFile>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArmFile {
    id: String,
    #[serde(default = "one")]
    weight: u32,
    model: Option<String>,
    instructions: Option<String>,
}

fn one() -> u32 {
    1
}

pub fn load(src: &SourceFile, id: &str, diags: &mut Diagnostics) -> Option<AbDef> {
    if !parse::is_valid_name(id) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{id}` is not a valid experiment id", src.rel),
        );
        return None;
    }
    let file: AbFile = parse::toml_file(src, diags)?;
    let mut ids = HashSet::new();
    let distinct = file.arms.iter().all(|a| ids.insert(a.id.as_str()));
    if file.arms.len() < 2 || !distinct || file.arms.iter().any(|a| a.weight == 0 || !parse::is_valid_name(&a.id)) {
        diags.report(
            Code::AbArms,
            Some(&src.rel),
            src.pos_of_key("arms"),
            format!(
                "{}: experiment `{id}` needs two or more arms with distinct valid ids and positive weights",
                src.rel
            ),
        );
        return None;
    }
    Some(AbDef {
        id: id.to_owned(),
        file: src.rel.clone(),
        description: file.description,
        enabled: file.enabled,
        arms: file
            .arms
            .into_iter()
            .map(|a| AbArm { id: a.id, weight: a.weight, model: a.model, instructions: a.instructions })
            .collect(),
    })
}
