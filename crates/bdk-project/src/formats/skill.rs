//! `skills/<name>.md` and `skills/<name>/SKILL.md` (+ sibling files): procedures the model loads
//! on demand. The frontmatter `description` is the routing rule the model reads; a flat skill
//! without one is described by its first body line, a folder skill must declare it.

use serde::Deserialize;
use serde_json::Value;

use crate::diag::{Code, Diagnostics};
use crate::model::SkillDef;
use crate::parse;
use crate::source::{self, Entry, MAX_MARKDOWN_BYTES, Rel};

use super::Origin;

/// The Agent Skills frontmatter keys. Others are kept by the convention's tools, so they only warn.
#[derive(Debug, Default, Deserialize)]
struct SkillFront {
    name: Option<String>,
    description: Option<String>,
    #[serde(flatten)]
    extra: serde_json::Map<String, Value>,
}

const KNOWN_EXTRA: &[&str] = &["license", "compatibility", "metadata", "allowed-tools"];

pub fn load(entry: &Entry, origin: &Origin, rel: &Rel, diags: &mut Diagnostics) -> Option<SkillDef> {
    let (name, path, files) = if entry.is_dir {
        let skill_md = entry.path.join("SKILL.md");
        if !skill_md.exists() {
            let shown = rel.of(&entry.path);
            diags.report_with_hint(
                Code::MissingField,
                Some(&shown),
                None,
                format!("{shown}: skill folder has no SKILL.md"),
                "add SKILL.md with `description` frontmatter",
            );
            return None;
        }
        let files = source::walk_files(&entry.path, rel, diags).into_iter().filter(|f| f != "SKILL.md").collect();
        (entry.name.clone(), skill_md, files)
    } else {
        (entry.stem().to_owned(), entry.path.clone(), Vec::new())
    };
    let src = source::read_text(&path, rel, MAX_MARKDOWN_BYTES, diags)?;
    if !parse::is_valid_name(&name) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{name}` is not a valid skill name", src.rel),
        );
        return None;
    }
    let md = parse::markdown(&src, diags)?;
    let front: SkillFront = parse::frontmatter(&src, &md, diags)?;
    for key in front.extra.keys().filter(|k| !KNOWN_EXTRA.contains(&k.as_str())) {
        diags.report(
            Code::UnknownFrontmatterKey,
            Some(&src.rel),
            src.pos_of_key(key),
            format!("{}: unknown frontmatter key `{key}`", src.rel),
        );
    }
    if let Some(declared) = &front.name
        && declared != &name
    {
        diags.report_with_hint(
            Code::InvalidName,
            Some(&src.rel),
            src.pos_of_key("name"),
            format!("{}: frontmatter name `{declared}` differs from the file name `{name}`", src.rel),
            "the path decides the name; make them match or drop `name`",
        );
    }
    // A flat skill may leave `description` out: its first body line stands in. A folder skill
    // (a package other tools read too) must declare it.
    let declared = front.description.filter(|d| !d.trim().is_empty());
    let description = match declared {
        Some(d) => d,
        None if !entry.is_dir => match first_line(md.body) {
            Some(line) => line.to_owned(),
            None => {
                diags.report_with_hint(
                    Code::MissingDescription,
                    Some(&src.rel),
                    Some(source::Pos { line: 1, column: 1 }),
                    format!("{}: skill `{name}` has no `description` frontmatter and an empty body", src.rel),
                    "add `description` frontmatter, or a first line saying when to use the skill",
                );
                return None;
            }
        },
        None => {
            diags.report(
                Code::MissingDescription,
                Some(&src.rel),
                Some(source::Pos { line: 1, column: 1 }),
                format!("{}: skill `{name}` has no `description` frontmatter (required in SKILL.md)", src.rel),
            );
            return None;
        }
    };
    Some(SkillDef {
        name: origin.name(&name),
        description,
        source: origin.source,
        file: src.rel.clone(),
        path,
        body: md.body.to_owned(),
        files,
    })
}

/// The first non-empty body line with its heading marks (`#`) and surrounding space removed.
fn first_line(body: &str) -> Option<&str> {
    body.lines().map(|l| l.trim().trim_start_matches('#').trim()).find(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::first_line;

    #[test]
    fn the_first_body_line_is_the_fallback_description() {
        assert_eq!(first_line("\n\n# Triage a failed release\n\n1. Read.\n"), Some("Triage a failed release"));
        assert_eq!(first_line("  Use when asked.  \nMore.\n"), Some("Use when asked."));
        assert_eq!(first_line("#\n##   \nBody.\n"), Some("Body."));
        assert_eq!(first_line(" \n\t\n"), None);
    }
}
