//! `agent.toml` (root agent and subagents) and instructions (`instructions.md` or an
//! `instructions/` folder of `.md` files joined in filename order).

use std::path::Path;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::{Compaction, Harness, Hosting, Instructions, ModelDef, Pricing};
use crate::parse;
use crate::source::{self, MAX_MARKDOWN_BYTES, Rel, SourceFile};

/// Instructions longer than this cost real tokens on every call: a warning.
pub const LARGE_INSTRUCTIONS_BYTES: usize = 100 * 1024;

/// Built-in harness tools an allowlist may name.
pub const BUILTIN_TOOLS: &[&str] = &["read", "ls", "glob", "grep", "write", "edit", "shell", "task", "mcp"];

/// `[compaction] threshold` when unset: compact above 80% of the context window.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// `[compaction] keep_turns` when unset.
pub const DEFAULT_KEEP_TURNS: u32 = 2;

/// Providers a `[model]` table may name.
pub const PROVIDERS: &[&str] = &["xai", "openai", "openai-compatible", "anthropic", "scripted"];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    name: Option<String>,
    description: Option<String>,
    model: Option<toml::Value>,
    tools: Option<Vec<String>>,
    local: Option<LocalFile>,
    builtin_tools: Option<BuiltinToolsFile>,
    max_steps: Option<u32>,
    max_running_turns: Option<u32>,
    hosting: Option<HostingFile>,
    compaction: Option<CompactionFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactionFile {
    enabled: Option<bool>,
    threshold: Option<f64>,
    keep_turns: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LocalFile {
    #[serde(default)]
    sandbox: bool,
    #[serde(default)]
    sandbox_network: bool,
    cwd: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinToolsFile {
    #[serde(default)]
    reminders: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostingFile {
    #[serde(default)]
    egress_domains: Vec<String>,
    #[serde(default)]
    secret_names: Vec<String>,
}

impl From<HostingFile> for Hosting {
    fn from(file: HostingFile) -> Self {
        Hosting { egress_domains: file.egress_domains, secret_names: file.secret_names }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelTable {
    id: Option<String>,
    provider: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    #[serde(default)]
    params: toml::Table,
    pricing: Option<PricingFile>,
    context_window: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricingFile {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubagentFile {
    description: Option<String>,
    model: Option<toml::Value>,
    instructions: Option<String>,
    max_steps: Option<u32>,
}

/// The root agent's settings.
#[derive(Debug, Default)]
pub struct RootAgent {
    pub name: Option<String>,
    pub description: Option<String>,
    pub model: Option<ModelDef>,
    pub harness: Harness,
    pub hosting: Option<Hosting>,
}

pub fn load_root(src: &SourceFile, diags: &mut Diagnostics) -> RootAgent {
    let Some(file) = parse::toml_file::<AgentFile>(src, diags) else {
        return RootAgent::default();
    };
    let mut harness = Harness::default();
    if let Some(tools) = file.tools {
        for tool in tools.iter().filter(|t| !BUILTIN_TOOLS.contains(&t.as_str())) {
            diags.report(
                Code::UnknownBuiltinTool,
                Some(&src.rel),
                src.pos_of_key("tools"),
                format!("{}: `{tool}` is not a built-in harness tool", src.rel),
            );
        }
        harness.tools = Some(tools);
    }
    if let Some(local) = file.local {
        harness.sandbox = local.sandbox;
        harness.sandbox_network = local.sandbox_network;
        match local.cwd {
            Some(cwd) if cwd.trim().is_empty() => diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key("cwd"),
                format!("{}: `local.cwd` must name a folder (relative paths are under the project folder)", src.rel),
            ),
            cwd => harness.cwd = cwd,
        }
    }
    if let Some(compaction) = file.compaction {
        harness.compaction = compaction_of(compaction, src, diags);
    }
    harness.builtin_reminders = file.builtin_tools.is_some_and(|b| b.reminders);
    for (key, value, slot) in [
        ("max_steps", file.max_steps, &mut harness.max_steps),
        ("max_running_turns", file.max_running_turns, &mut harness.max_running_turns),
    ] {
        match value {
            Some(0) => diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key(key),
                format!("{}: `{key}` must be at least 1", src.rel),
            ),
            Some(v) => *slot = v,
            None => {}
        }
    }
    RootAgent {
        name: file.name.filter(|n| !n.trim().is_empty()),
        description: file.description,
        model: file.model.as_ref().and_then(|m| model(m, src, diags)),
        harness,
        hosting: file.hosting.map(Hosting::from),
    }
}

/// `[compaction]` over the defaults; a threshold outside (0, 1] is reported and ignored.
fn compaction_of(file: CompactionFile, src: &SourceFile, diags: &mut Diagnostics) -> Compaction {
    let mut compaction = Compaction::default();
    if let Some(enabled) = file.enabled {
        compaction.enabled = enabled;
    }
    match file.threshold {
        Some(t) if !(t > 0.0 && t <= 1.0) => diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("threshold"),
            format!(
                "{}: `compaction.threshold` is {t}; it must be a share of the context window, above 0 and at most 1",
                src.rel
            ),
        ),
        Some(t) => compaction.threshold = t,
        None => {}
    }
    if let Some(keep) = file.keep_turns {
        compaction.keep_turns = keep;
    }
    compaction
}

/// A subagent's `agent.toml`: description (required), model (optional), inline instructions.
#[derive(Debug)]
pub struct Subagent {
    pub description: Option<String>,
    pub model: Option<ModelDef>,
    pub instructions: Option<String>,
    pub max_steps: Option<u32>,
}

pub fn load_subagent(src: &SourceFile, diags: &mut Diagnostics) -> Option<Subagent> {
    let file: SubagentFile = parse::toml_file(src, diags)?;
    if file.max_steps == Some(0) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("max_steps"),
            format!("{}: `max_steps` must be at least 1", src.rel),
        );
    }
    Some(Subagent {
        description: file.description.filter(|d| !d.trim().is_empty()),
        model: file.model.as_ref().and_then(|m| model(m, src, diags)),
        instructions: file.instructions,
        max_steps: file.max_steps.filter(|n| *n > 0),
    })
}

/// `model = "id"` or a `[model]` table.
fn model(value: &toml::Value, src: &SourceFile, diags: &mut Diagnostics) -> Option<ModelDef> {
    model_at(value, src, "model", diags)
}

/// A model id string or a `[model]`-shaped table under `key` (agent.toml's `model`, evals.toml's
/// `judge_model`).
pub(crate) fn model_at(value: &toml::Value, src: &SourceFile, key: &str, diags: &mut Diagnostics) -> Option<ModelDef> {
    let table = match value {
        toml::Value::String(id) if !id.trim().is_empty() => {
            return Some(ModelDef {
                id: id.clone(),
                provider: None,
                base_url: None,
                api_key_env: None,
                params: Default::default(),
                pricing: None,
                context_window: None,
            });
        }
        toml::Value::Table(_) => match value.clone().try_into::<ModelTable>() {
            Ok(table) => table,
            Err(err) => {
                let message = err.message().trim().to_owned();
                let code = match parse::classify(&message) {
                    Code::TomlSyntax => Code::WrongType,
                    code => code,
                };
                diags.report(code, Some(&src.rel), src.pos_of_key(key), format!("{}: [{key}]: {message}", src.rel));
                return None;
            }
        },
        _ => {
            diags.report(
                Code::WrongType,
                Some(&src.rel),
                src.pos_of_key(key),
                format!("{}: `{key}` must be a model id string or a [{key}] table", src.rel),
            );
            return None;
        }
    };
    if let Some(provider) = &table.provider
        && !PROVIDERS.contains(&provider.as_str())
    {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("provider"),
            format!("{}: provider `{provider}` is not one of {}", src.rel, PROVIDERS.join(", ")),
        );
    }
    if let Some(url) = &table.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("base_url"),
            format!("{}: base_url `{url}` must start with http:// or https://", src.rel),
        );
    }
    let pricing = table.pricing.map(|p| Pricing { input: p.input, output: p.output, cached_input: p.cached_input });
    if pricing.is_some_and(|p| p.input < 0.0 || p.output < 0.0 || p.cached_input.is_some_and(|c| c < 0.0)) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("pricing"),
            format!("{}: prices must not be negative", src.rel),
        );
    }
    if table.context_window == Some(0) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("context_window"),
            format!("{}: `context_window` must be at least 1 token", src.rel),
        );
    }
    let params = match serde_json::to_value(&table.params) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => Default::default(),
    };
    Some(ModelDef {
        id: table.id.unwrap_or_else(|| crate::DEFAULT_MODEL.to_owned()),
        provider: table.provider,
        base_url: table.base_url,
        api_key_env: table.api_key_env,
        params,
        pricing,
        context_window: table.context_window.filter(|n| *n > 0),
    })
}

/// Loads `instructions.md` or `instructions/*.md` from `dir`. `None` when neither exists.
pub fn load_instructions(dir: &Path, rel: &Rel, diags: &mut Diagnostics) -> Option<Instructions> {
    let file = dir.join("instructions.md");
    let folder = dir.join("instructions");
    let mut sources = Vec::new();
    if folder.is_dir() {
        if file.exists() {
            let shown = rel.of(&folder);
            diags.report_with_hint(
                Code::StrayFile,
                Some(&shown),
                None,
                format!("{shown}: ignored because instructions.md exists"),
                "keep either instructions.md or the instructions/ folder",
            );
        } else {
            for entry in source::list_dir(&folder, rel, diags) {
                if entry.extension() == Some("md") {
                    // A directory named `x.md` is reported by the read as expected_file.
                    sources.extend(source::read_text(&entry.path, rel, MAX_MARKDOWN_BYTES, diags));
                } else {
                    crate::walk::report_stray(&entry, "instructions/ holds only .md files", rel, diags);
                }
            }
            if sources.is_empty() {
                let shown = rel.of(&folder);
                diags.report(
                    Code::EmptyInstructions,
                    Some(&shown),
                    None,
                    format!("{shown}: the instructions folder holds no .md file"),
                );
                return Some(Instructions::default());
            }
        }
    }
    if sources.is_empty() {
        if !file.exists() && std::fs::symlink_metadata(&file).is_err() {
            return None;
        }
        sources.extend(source::read_text(&file, rel, MAX_MARKDOWN_BYTES, diags));
        if sources.is_empty() {
            // Unreadable: already reported; count it as present so no second error is raised.
            return Some(Instructions { files: vec![rel.of(&file)], text: String::new() });
        }
    }
    let files: Vec<String> = sources.iter().map(|s| s.rel.clone()).collect();
    let text = sources.iter().map(|s| s.text.trim_end()).collect::<Vec<_>>().join("\n\n");
    let shown = files.first().cloned().unwrap_or_default();
    if text.trim().is_empty() {
        diags.report(Code::EmptyInstructions, Some(&shown), None, format!("{shown}: instructions are empty"));
    } else if text.len() > LARGE_INSTRUCTIONS_BYTES {
        diags.report(
            Code::LargeInstructions,
            Some(&shown),
            None,
            format!("{shown}: instructions are {} bytes; they are sent on every model call", text.len()),
        );
    }
    Some(Instructions { files, text })
}
