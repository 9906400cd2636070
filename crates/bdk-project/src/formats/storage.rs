//! `storage.toml`: where durable state lives and how sessions are restored after a restart.

use std::time::Duration;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::StorageDef;
use crate::parse::{self, DurationValue};
use crate::source::SourceFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StorageFile {
    #[serde(default = "fs")]
    backend: String,
    url_env: Option<String>,
    #[serde(default)]
    policy: PolicyFile,
}

fn fs() -> String {
    "fs".to_owned()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    debounce_ms: Option<u64>,
    restore: Option<RestoreFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreFile {
    max_sessions: Option<u32>,
    max_age: Option<DurationValue>,
}

pub fn load(src: &SourceFile, diags: &mut Diagnostics) -> Option<StorageDef> {
    let file: StorageFile = parse::toml_file(src, diags)?;
    match file.backend.as_str() {
        "fs" => {}
        "postgres" if file.url_env.is_some() => {}
        "postgres" => {
            diags.report_with_hint(
                Code::MissingField,
                Some(&src.rel),
                src.pos_of_key("backend"),
                format!("{}: the postgres backend needs `url_env`", src.rel),
                "set url_env to the environment variable holding the connection URL",
            );
            return None;
        }
        other => {
            diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key("backend"),
                format!("{}: backend `{other}` is not one of fs, postgres", src.rel),
            );
            return None;
        }
    }
    let debounce = Duration::from_millis(file.policy.debounce_ms.unwrap_or(0));
    let (max_sessions, max_age) = match &file.policy.restore {
        Some(restore) => (
            restore.max_sessions,
            restore.max_age.as_ref().map(|a| a.resolve(src, "max_age", Duration::from_secs(86_400), diags)),
        ),
        None => (None, None),
    };
    Some(StorageDef {
        file: src.rel.clone(),
        backend: file.backend,
        url_env: file.url_env,
        debounce,
        restore_max_sessions: max_sessions,
        restore_max_age: max_age,
    })
}
