//! The diagnostic codes BDK reports and the collector the loaders push into.
//!
//! Codes are stable strings: scripts match on them, docs/cli.md lists them. Add new ones at the
//! end of [`Code`] and document them in the same commit.

use bdk_protocol::{Diagnostic, Severity};

use crate::source::Pos;

/// Every diagnostic code, with its severity and a default fix hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    // Reading files.
    IoError,
    NotUtf8,
    FileTooLarge,
    ExpectedFile,
    ExpectedDirectory,
    // Parsing.
    TomlSyntax,
    FrontmatterSyntax,
    UnknownKey,
    WrongType,
    MissingField,
    InvalidValue,
    // Layout.
    NoProject,
    BothLayouts,
    InvalidSlug,
    DuplicateSlug,
    UnknownFolder,
    StrayFile,
    TypescriptDefinition,
    EvalsInsideBot,
    SubagentCapabilityIgnored,
    InvalidName,
    // Content rules.
    MissingInstructions,
    EmptyInstructions,
    LargeInstructions,
    MissingDescription,
    MissingAgentToml,
    ToolBodyMissing,
    ToolBodyConflict,
    AgentToolNeedsScript,
    InvalidSchema,
    SchemaTooDeep,
    TimeArgsUnknownProperty,
    InvalidCron,
    EmptyPrompt,
    ScheduleBody,
    UnknownChannel,
    ConnectionTransport,
    UnsetPlaceholder,
    HookSink,
    UnknownEvent,
    InvalidRoute,
    DuplicateRoute,
    UnknownBuiltinTool,
    NameClash,
    ArtifactsNoKinds,
    AbArms,
    ExtensionPath,
    EvalsConfigMissing,
    EvalShape,
    DuplicateCase,
    InvalidRegex,
    UnknownToolReference,
    UnknownFrontmatterKey,
    UnreachableSubagents,
    MissingCommandFile,
    ScheduleReceiveUnsupported,
    NotRunYet,
    SandboxNotEnforced,
    UnknownPeer,
}

impl Code {
    /// All codes, in documentation order.
    pub const ALL: &'static [Code] = &[
        Code::IoError,
        Code::NotUtf8,
        Code::FileTooLarge,
        Code::ExpectedFile,
        Code::ExpectedDirectory,
        Code::TomlSyntax,
        Code::FrontmatterSyntax,
        Code::UnknownKey,
        Code::WrongType,
        Code::MissingField,
        Code::InvalidValue,
        Code::NoProject,
        Code::BothLayouts,
        Code::InvalidSlug,
        Code::DuplicateSlug,
        Code::UnknownFolder,
        Code::StrayFile,
        Code::TypescriptDefinition,
        Code::EvalsInsideBot,
        Code::SubagentCapabilityIgnored,
        Code::InvalidName,
        Code::MissingInstructions,
        Code::EmptyInstructions,
        Code::LargeInstructions,
        Code::MissingDescription,
        Code::MissingAgentToml,
        Code::ToolBodyMissing,
        Code::ToolBodyConflict,
        Code::AgentToolNeedsScript,
        Code::InvalidSchema,
        Code::SchemaTooDeep,
        Code::TimeArgsUnknownProperty,
        Code::InvalidCron,
        Code::EmptyPrompt,
        Code::ScheduleBody,
        Code::UnknownChannel,
        Code::ConnectionTransport,
        Code::UnsetPlaceholder,
        Code::HookSink,
        Code::UnknownEvent,
        Code::InvalidRoute,
        Code::DuplicateRoute,
        Code::UnknownBuiltinTool,
        Code::NameClash,
        Code::ArtifactsNoKinds,
        Code::AbArms,
        Code::ExtensionPath,
        Code::EvalsConfigMissing,
        Code::EvalShape,
        Code::DuplicateCase,
        Code::InvalidRegex,
        Code::UnknownToolReference,
        Code::UnknownFrontmatterKey,
        Code::UnreachableSubagents,
        Code::MissingCommandFile,
        Code::ScheduleReceiveUnsupported,
        Code::NotRunYet,
        Code::SandboxNotEnforced,
        Code::UnknownPeer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::IoError => "io_error",
            Code::NotUtf8 => "not_utf8",
            Code::FileTooLarge => "file_too_large",
            Code::ExpectedFile => "expected_file",
            Code::ExpectedDirectory => "expected_directory",
            Code::TomlSyntax => "toml_syntax",
            Code::FrontmatterSyntax => "frontmatter_syntax",
            Code::UnknownKey => "unknown_key",
            Code::WrongType => "wrong_type",
            Code::MissingField => "missing_field",
            Code::InvalidValue => "invalid_value",
            Code::NoProject => "no_project",
            Code::BothLayouts => "both_layouts",
            Code::InvalidSlug => "invalid_slug",
            Code::DuplicateSlug => "duplicate_slug",
            Code::UnknownFolder => "unknown_folder",
            Code::StrayFile => "stray_file",
            Code::TypescriptDefinition => "typescript_definition",
            Code::EvalsInsideBot => "evals_inside_bot",
            Code::SubagentCapabilityIgnored => "subagent_capability_ignored",
            Code::InvalidName => "invalid_name",
            Code::MissingInstructions => "missing_instructions",
            Code::EmptyInstructions => "empty_instructions",
            Code::LargeInstructions => "large_instructions",
            Code::MissingDescription => "missing_description",
            Code::MissingAgentToml => "missing_agent_toml",
            Code::ToolBodyMissing => "tool_body_missing",
            Code::ToolBodyConflict => "tool_body_conflict",
            Code::AgentToolNeedsScript => "agent_tool_needs_script",
            Code::InvalidSchema => "invalid_schema",
            Code::SchemaTooDeep => "schema_too_deep",
            Code::TimeArgsUnknownProperty => "time_args_unknown_property",
            Code::InvalidCron => "invalid_cron",
            Code::EmptyPrompt => "empty_prompt",
            Code::ScheduleBody => "schedule_body",
            Code::UnknownChannel => "unknown_channel",
            Code::ConnectionTransport => "connection_transport",
            Code::UnsetPlaceholder => "unset_placeholder",
            Code::HookSink => "hook_sink",
            Code::UnknownEvent => "unknown_event",
            Code::InvalidRoute => "invalid_route",
            Code::DuplicateRoute => "duplicate_route",
            Code::UnknownBuiltinTool => "unknown_builtin_tool",
            Code::NameClash => "name_clash",
            Code::ArtifactsNoKinds => "artifacts_no_kinds",
            Code::AbArms => "ab_arms",
            Code::ExtensionPath => "extension_path",
            Code::EvalsConfigMissing => "evals_config_missing",
            Code::EvalShape => "eval_shape",
            Code::DuplicateCase => "duplicate_case",
            Code::InvalidRegex => "invalid_regex",
            Code::UnknownToolReference => "unknown_tool_reference",
            Code::UnknownFrontmatterKey => "unknown_frontmatter_key",
            Code::UnreachableSubagents => "unreachable_subagents",
            Code::MissingCommandFile => "missing_command_file",
            Code::ScheduleReceiveUnsupported => "schedule_receive_unsupported",
            Code::NotRunYet => "not_run_yet",
            Code::SandboxNotEnforced => "sandbox_not_enforced",
            Code::UnknownPeer => "unknown_peer",
        }
    }

    /// The default severity; [`Diagnostics::report_as`] overrides it where context matters.
    pub fn severity(self) -> Severity {
        match self {
            Code::BothLayouts
            | Code::UnknownFolder
            | Code::StrayFile
            | Code::TypescriptDefinition
            | Code::EvalsInsideBot
            | Code::SubagentCapabilityIgnored
            | Code::LargeInstructions
            | Code::UnsetPlaceholder
            | Code::UnknownEvent
            | Code::UnknownToolReference
            | Code::UnknownFrontmatterKey
            | Code::UnreachableSubagents
            | Code::MissingCommandFile
            | Code::ScheduleReceiveUnsupported
            | Code::NotRunYet
            | Code::SandboxNotEnforced => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// The fix hint used when the loader has nothing more specific to say.
    pub fn hint(self) -> &'static str {
        match self {
            Code::IoError => "check the file's permissions, or remove a broken or looping symlink",
            Code::NotUtf8 => "save the file as UTF-8",
            Code::FileTooLarge => "split the content or move it to lib/ and read it from a tool",
            Code::ExpectedFile => "this path must be a file; move the directory away",
            Code::ExpectedDirectory => "this path must be a directory",
            Code::TomlSyntax => "fix the TOML syntax at the position shown",
            Code::FrontmatterSyntax => "fix the YAML between the leading `---` lines",
            Code::UnknownKey => "remove the key or fix its spelling; docs/formats.md lists every key",
            Code::WrongType => "change the value to the type docs/formats.md gives for this key",
            Code::MissingField => "add the required key",
            Code::InvalidValue => "use one of the values docs/formats.md lists for this key",
            Code::NoProject => {
                "point --dir at a folder holding bot/ (or agent/), or at a folder of such projects; `bdk init DIR` makes one"
            }
            Code::BothLayouts => "move everything into bot/ and delete agent/",
            Code::InvalidSlug => {
                "rename the folder to match [A-Za-z0-9][A-Za-z0-9_-]* and avoid v1, playground and docs"
            }
            Code::DuplicateSlug => "mount projects whose folder names differ",
            Code::UnknownFolder => "move it to lib/ (never discovered) or remove it",
            Code::StrayFile => "move it to lib/ (never discovered) or give it the extension this folder expects",
            Code::TypescriptDefinition => {
                "BDK reads TOML and Markdown; rewrite the definition as .toml (docs/formats.md)"
            }
            Code::EvalsInsideBot => "move evals/ next to bot/, at the project root",
            Code::SubagentCapabilityIgnored => {
                "subagents inherit the parent's tools and connections; move this folder to the root agent"
            }
            Code::InvalidName => {
                "use letters, digits, `_` and `-`, starting with a letter or digit (tool names: at most 64)"
            }
            Code::MissingInstructions => "add instructions.md (or an instructions/ folder of .md files)",
            Code::EmptyInstructions => "write the agent's identity, tool-choice rules and output contract",
            Code::LargeInstructions => "instructions are sent on every model call; move procedures into skills/",
            Code::MissingDescription => "add a description: it is all the model sees before choosing",
            Code::MissingAgentToml => "add agent.toml with at least `description = \"...\"`",
            Code::ToolBodyMissing => "add `command = [...]` (server tools) or `script = \"...\"`",
            Code::ToolBodyConflict => "keep one of `command` and `script`",
            Code::AgentToolNeedsScript => "agent tools run as scripts in the session workspace: use `script`",
            Code::InvalidSchema => "fix the JSON Schema (draft 2020-12)",
            Code::SchemaTooDeep => "flatten the schema; nesting is limited to 64 levels",
            Code::TimeArgsUnknownProperty => "every time_args name must be a property of input_schema",
            Code::InvalidCron => "use a 5-field cron expression evaluated in UTC, e.g. \"0 9 * * 1-5\"",
            Code::EmptyPrompt => "write the prompt the schedule sends",
            Code::ScheduleBody => "give exactly one of `prompt`, `run` and `receive`",
            Code::UnknownChannel => "name a channel defined under channels/",
            Code::ConnectionTransport => "give exactly one of `command` (stdio), `url` (HTTP) and `agent` (peer)",
            Code::UnsetPlaceholder => "export the variable before serving; it is read each time a client opens",
            Code::HookSink => "give exactly one of `command` and `sink`",
            Code::UnknownEvent => "use an event type from docs/formats.md#hooks, or \"*\"",
            Code::InvalidRoute => "routes need a method (GET, POST, PUT, PATCH, DELETE) and a path starting with /",
            Code::DuplicateRoute => "give each route a distinct method and path",
            Code::UnknownBuiltinTool => "use built-in tool names: read, ls, glob, grep, write, edit, shell, task, mcp",
            Code::NameClash => "rename one of them; the model and direct calls need one meaning per name",
            Code::ArtifactsNoKinds => "declare at least one [kinds.<name>] when agent_tool = true",
            Code::AbArms => "give an experiment two or more arms with distinct ids and positive weights",
            Code::ExtensionPath => "set `path` to a bot-shaped folder, relative to the extension file",
            Code::EvalsConfigMissing => "add evals/evals.toml (for example `max_concurrency = 4`)",
            Code::EvalShape => {
                "give either one conversation (`message` or [[turns]], each message non-empty) with [expect], or [[cases]]"
            }
            Code::DuplicateCase => "give every case a unique single-segment id",
            Code::InvalidRegex => "fix the regular expression (Rust regex syntax)",
            Code::UnknownToolReference => "check the tool name against `bdk info`",
            Code::UnknownFrontmatterKey => {
                "skill frontmatter keys: name, description, license, compatibility, metadata, allowed-tools"
            }
            Code::UnreachableSubagents => {
                "add \"task\" to `tools` in agent.toml, or remove the subagents the model cannot reach"
            }
            Code::MissingCommandFile => {
                "commands run with the agent folder as cwd: fix the path, or add the file (scripts go in lib/)"
            }
            Code::ScheduleReceiveUnsupported => {
                "channels do not run yet, so a `receive` schedule never fires; use `prompt` or `run` (host `send`)"
            }
            Code::NotRunYet => {
                "this build validates the file but does not act on it yet; see the status section of the README"
            }
            Code::SandboxNotEnforced => {
                "`local.sandbox` confines the `shell` built-in and agent tools; command tools are your own code and run unconfined: move code the model controls into an agent tool"
            }
            Code::UnknownPeer => {
                "serve the peer's project in the same host (another --dir), or connect to its /v1/mcp by `url`"
            }
        }
    }
}

/// Collects diagnostics for one project. Every loader takes `&mut Diagnostics`.
#[derive(Debug, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Report `code` at `file` (project-relative) and an optional position.
    pub fn report(&mut self, code: Code, file: Option<&str>, pos: Option<Pos>, message: impl Into<String>) {
        self.report_with_hint(code, file, pos, message, code.hint());
    }

    pub fn report_with_hint(
        &mut self,
        code: Code,
        file: Option<&str>,
        pos: Option<Pos>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.report_as(code, code.severity(), file, pos, message, hint);
    }

    /// Report `code` with a severity other than its default, for the few codes whose weight
    /// depends on context (an unusable slug is only fatal where routing needs it).
    pub fn report_as(
        &mut self,
        code: Code,
        severity: Severity,
        file: Option<&str>,
        pos: Option<Pos>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let mut message = message.into();
        // Messages never repeat the file they are attached to.
        if let Some(prefix) = file.map(|f| format!("{f}: "))
            && message.starts_with(&prefix)
        {
            message.drain(..prefix.len());
        }
        self.items.push(Diagnostic {
            code: code.as_str().to_owned(),
            severity,
            file: file.map(str::to_owned),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            message,
            hint: Some(hint.into()),
        });
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    /// The diagnostics sorted by file, then position, errors before warnings at one place.
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.items.sort_by(|a, b| {
            (&a.file, a.line, a.column, a.severity, &a.code).cmp(&(&b.file, b.line, b.column, b.severity, &b.code))
        });
        self.items.dedup();
        self.items
    }

    pub fn extend(&mut self, other: Vec<Diagnostic>) {
        self.items.extend(other);
    }
}
