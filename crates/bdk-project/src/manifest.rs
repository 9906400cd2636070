//! Builds the wire manifest (`bdk info --json`, `GET /v1/info`) from a typed project.

use bdk_protocol::info::*;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::formats::schedule;
use crate::model::{
    Advertise, AuthPolicy, ConnectionScope, HookSink, Instructions, ModelDef, Predicate, Project, ScheduleAction,
    ToolBody, Transport,
};
use crate::parse::millis;
use crate::{DEFAULT_MODEL, DEFAULT_PROVIDER};

/// The manifest of `project`, with schedule fire times computed from now.
pub fn manifest(project: &Project) -> ProjectInfo {
    manifest_at(project, Utc::now())
}

/// The manifest with schedule fire times computed from `now` (deterministic for tests).
pub fn manifest_at(project: &Project, now: DateTime<Utc>) -> ProjectInfo {
    let caps = &project.caps;
    ProjectInfo {
        name: project.name.clone(),
        slug: project.slug.clone(),
        description: project.description.clone(),
        layout: project.layout.dir_name().to_owned(),
        model: project.model.as_ref().map_or_else(default_model, |m| model(m, "agent.toml")),
        harness: HarnessInfo {
            tools: project.harness.tools.clone(),
            builtin_tools: BuiltinToolsInfo { reminders: project.harness.builtin_reminders },
            max_steps: project.harness.max_steps,
            max_running_turns: project.harness.max_running_turns,
            local: LocalInfo { sandbox: project.harness.sandbox, cwd: project.harness.cwd.clone() },
        },
        instructions: instructions(&project.instructions),
        tools: caps.tools.iter().map(tool).collect(),
        skills: caps
            .skills
            .iter()
            .map(|s| SkillInfo { name: s.name.clone(), description: s.description.clone(), source: s.source, file: s.file.clone(), files: s.files.clone() })
            .collect(),
        connections: caps.connections.iter().map(connection).collect(),
        subagents: caps
            .subagents
            .iter()
            .map(|s| SubagentInfo {
                id: s.id.clone(),
                description: s.description.clone(),
                source: s.source,
                file: s.file.clone(),
                model: s.model.as_ref().map(|m| model(m, "agent.toml")),
                instructions: instructions(&s.instructions),
                max_steps: s.max_steps,
            })
            .collect(),
        channels: caps.channels.iter().map(channel).collect(),
        schedules: caps.schedules.iter().map(|s| schedule_info(s, now)).collect(),
        hooks: caps
            .hooks
            .iter()
            .map(|h| HookInfo {
                name: h.name.clone(),
                source: h.source,
                file: h.file.clone(),
                events: h.events.clone(),
                sink: match &h.sink {
                    HookSink::Command(command) => json!({ "kind": "command", "command": command }),
                    HookSink::File(path) => json!({ "kind": "file", "path": path }),
                    HookSink::Http { url, headers } => json!({ "kind": "http", "url": url, "headers": headers.iter().map(|(k, _)| k).collect::<Vec<_>>() }),
                },
            })
            .collect(),
        reminders: caps
            .reminders
            .iter()
            .map(|r| ReminderInfo {
                name: r.name.clone(),
                source: r.source,
                file: r.file.clone(),
                description: r.description.clone(),
                command: r.command.clone(),
                timeout_ms: millis(r.timeout),
            })
            .collect(),
        artifacts: project.artifacts.as_ref().map(|a| ArtifactsInfo {
            file: a.file.clone(),
            agent_tool: a.agent_tool,
            max: a.max,
            kinds: caps
                .artifact_kinds
                .iter()
                .map(|k| ArtifactKindInfo { name: k.name.clone(), description: k.description.clone(), source: k.source, schema: k.schema.clone() })
                .collect(),
        }),
        result: project.result.as_ref().map(|r| ResultInfo { file: r.file.clone(), command: r.command.clone(), timeout_ms: millis(r.timeout) }),
        storage: project.storage.as_ref().map(|s| StorageInfo {
            file: s.file.clone(),
            backend: s.backend.clone(),
            url_env: s.url_env.clone(),
            debounce_ms: millis(s.debounce),
            restore_max_sessions: s.restore_max_sessions,
            restore_max_age_ms: s.restore_max_age.map(millis),
        }),
        abs: project
            .abs
            .iter()
            .map(|a| AbInfo {
                id: a.id.clone(),
                file: a.file.clone(),
                description: a.description.clone(),
                enabled: a.enabled,
                arms: a.arms.iter().map(|arm| AbArmInfo { id: arm.id.clone(), weight: arm.weight, model: arm.model.clone(), instructions: arm.instructions.clone() }).collect(),
            })
            .collect(),
        extensions: project
            .extensions
            .iter()
            .map(|e| {
                let c = &e.contributed;
                ExtensionInfo {
                    namespace: e.namespace.clone(),
                    file: e.file.clone(),
                    path: crate::source::Rel::new(&project.dir).of(&e.path),
                    description: e.description.clone(),
                    instructions: e.instructions.is_some(),
                    tools: c.tools.clone(),
                    skills: c.skills.clone(),
                    connections: c.connections.clone(),
                    subagents: c.subagents.clone(),
                    channels: c.channels.clone(),
                    schedules: c.schedules.clone(),
                    hooks: c.hooks.clone(),
                    reminders: c.reminders.clone(),
                    artifact_kinds: c.artifact_kinds.clone(),
                    seeds: c.seeds.clone(),
                    egress_domains: e.hosting.egress_domains.clone(),
                    secret_names: e.hosting.secret_names.clone(),
                    config: e.config.clone(),
                }
            })
            .collect(),
        sandbox: SandboxInfo { seeds: caps.seeds.iter().map(|s| s.rel.clone()).collect() },
        hosting: project.hosting.as_ref().map(|h| HostingInfo { egress_domains: h.egress_domains.clone(), secret_names: h.secret_names.clone() }),
        evals: project.evals.as_ref().map(|e| EvalsInfo {
            max_concurrency: e.max_concurrency,
            timeout_ms: millis(e.timeout),
            cases: e
                .cases
                .iter()
                .map(|c| EvalCaseInfo {
                    id: c.id.clone(),
                    file: c.file.clone(),
                    description: c.description.clone(),
                    tags: c.tags.clone(),
                    turns: c.turns.len(),
                    expectations: c.expect.count(),
                })
                .collect(),
        }),
        diagnostics: project.diagnostics.clone(),
    }
}

fn default_model() -> ModelInfo {
    let mut params = serde_json::Map::new();
    params.insert("effort".into(), json!("high"));
    params.insert("fast".into(), json!(true));
    ModelInfo {
        id: DEFAULT_MODEL.to_owned(),
        provider: Some(DEFAULT_PROVIDER.to_owned()),
        base_url: None,
        api_key_env: None,
        params,
        pricing: None,
        source: "default".to_owned(),
    }
}

fn model(m: &ModelDef, source: &str) -> ModelInfo {
    ModelInfo {
        id: m.id.clone(),
        provider: m.provider.clone(),
        base_url: m.base_url.clone(),
        api_key_env: m.api_key_env.clone(),
        params: m.params.clone(),
        pricing: m.pricing.map(|p| PricingInfo { input: p.input, output: p.output, cached_input: p.cached_input }),
        source: source.to_owned(),
    }
}

fn instructions(i: &Instructions) -> InstructionsInfo {
    InstructionsInfo { files: i.files.clone(), bytes: i.text.len() as u64 }
}

fn predicate(p: &Predicate, when_key: &str) -> Value {
    match p {
        Predicate::Always(b) => json!(b),
        Predicate::When(schema) => json!({ when_key: schema }),
    }
}

fn tool(t: &crate::model::ToolDef) -> ToolInfo {
    let effect = match &t.effect_write {
        Predicate::Always(true) => json!("write"),
        Predicate::Always(false) => json!("read"),
        other => predicate(other, "writeWhen"),
    };
    let (runner, command) = match &t.body {
        ToolBody::Command(command) => ("command", Some(command.clone())),
        ToolBody::Script(_) => ("script", None),
        ToolBody::Native => ("native", None),
    };
    ToolInfo {
        name: t.name.clone(),
        description: t.description.clone(),
        source: t.source,
        file: t.file.clone(),
        execution: t.execution.as_str().to_owned(),
        effect,
        needs_approval: predicate(&t.needs_approval, "when"),
        input_schema: t.input_schema.clone(),
        output_schema: t.output_schema.clone(),
        time_args: t.time_args.clone(),
        dry_run_result: t.dry_run_result.clone(),
        timeout_ms: millis(t.timeout),
        runner: runner.to_owned(),
        command,
    }
}

fn connection(c: &crate::model::ConnectionDef) -> ConnectionInfo {
    let mut info = ConnectionInfo {
        name: c.name.clone(),
        scope: match c.scope {
            ConnectionScope::Model => "model",
            ConnectionScope::Host => "host",
        }
        .to_owned(),
        source: c.source,
        file: c.file.clone(),
        description: c.description.clone(),
        transport: String::new(),
        command: None,
        args: Vec::new(),
        url: None,
        agent: None,
        env: Vec::new(),
        headers: Vec::new(),
        placeholders: c.placeholders.clone(),
        // Listed by the names the model sees (`ns__tool` inside an extension).
        advertise_tools: match &c.advertise {
            Advertise::None => json!(false),
            Advertise::All => json!(true),
            Advertise::Only(_) => json!(c.advertised_names()),
        },
        allow_tools: c.allow_tools.clone(),
        deny_tools: c.deny_tools.clone(),
    };
    match &c.transport {
        Transport::Stdio { command, args, env } => {
            info.transport = "stdio".into();
            info.command = Some(command.clone());
            info.args = args.clone();
            info.env = env.iter().map(|(k, _)| k.clone()).collect();
        }
        Transport::Http { url, headers } => {
            info.transport = "http".into();
            info.url = Some(url.clone());
            info.headers = headers.iter().map(|(k, _)| k.clone()).collect();
        }
        Transport::Agent { slug } => {
            info.transport = "agent".into();
            info.agent = Some(slug.clone());
        }
    }
    info
}

/// The route a GitHub or Slack channel serves by itself (it declares none).
fn builtin_route(c: &crate::model::ChannelDef) -> Option<RouteInfo> {
    let (path, description) = match c.kind {
        crate::model::ChannelKind::Github => ("/webhook", "GitHub webhook deliveries (X-Hub-Signature-256)"),
        crate::model::ChannelKind::Slack => ("/events", "Slack Events API (signed with the signing secret)"),
        _ => return None,
    };
    Some(RouteInfo {
        method: "POST".into(),
        path: path.into(),
        mounted_path: format!("/v1/channels/{}{path}", c.id),
        description: Some(description.into()),
        body_schema: None,
        query_schema: None,
        handler: Vec::new(),
    })
}

fn channel(c: &crate::model::ChannelDef) -> ChannelInfo {
    ChannelInfo {
        id: c.id.clone(),
        kind: c.kind.as_str().to_owned(),
        source: c.source,
        file: c.file.clone(),
        description: c.description.clone(),
        auth: c
            .auth
            .iter()
            .map(|a| match a {
                AuthPolicy::LocalDevStrict => json!({ "kind": "local_dev_strict" }),
                AuthPolicy::Bearer { token_env, principal } => {
                    json!({ "kind": "bearer", "tokenEnv": token_env, "principal": principal })
                }
                AuthPolicy::AllowAll => json!({ "kind": "allow_all" }),
            })
            .collect(),
        admission: c.admission.as_str().to_owned(),
        routes: c
            .routes
            .iter()
            .map(|r| RouteInfo {
                method: r.method.clone(),
                path: r.path.clone(),
                mounted_path: format!("/v1/channels/{}{}", c.id, r.path),
                description: r.description.clone(),
                body_schema: r.body_schema.clone(),
                query_schema: r.query_schema.clone(),
                handler: r.handler.clone(),
            })
            .chain(builtin_route(c))
            .collect(),
        settings: c.settings.clone(),
    }
}

fn schedule_info(s: &crate::model::ScheduleDef, now: DateTime<Utc>) -> ScheduleInfo {
    let (kind, prompt, run, receive) = match &s.action {
        ScheduleAction::Prompt(p) => ("prompt", Some(p.clone()), None, None),
        ScheduleAction::Run(r) => ("run", None, Some(r.clone()), None),
        ScheduleAction::Receive { channel, message } => {
            ("receive", None, None, Some(ReceiveInfo { channel: channel.clone(), message: message.clone() }))
        }
    };
    ScheduleInfo {
        id: s.id.clone(),
        source: s.source,
        file: s.file.clone(),
        cron: s.cron.clone(),
        description: s.description.clone(),
        kind: kind.to_owned(),
        prompt,
        run,
        next_fire_at: schedule::next_fire(&s.cron, now).map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        receive,
        last_firing: None,
    }
}
