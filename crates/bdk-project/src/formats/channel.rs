//! `channels/<id>.toml`: HTTP surfaces beyond the session API, mounted under
//! `/v1/channels/<id>`. Each route validates its body or query against a schema, then runs a
//! handler command.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::{Admission, AuthPolicy, ChannelDef, ChannelKind, RouteDef, RouteSend};
use crate::parse::{self, DurationValue};
use crate::schema;
use crate::source::{Pos, SourceFile};

use super::Origin;

/// Route handlers time out after this long unless `timeout` says otherwise.
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(30);
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelFile {
    #[serde(default)]
    kind: KindFile,
    description: Option<String>,
    #[serde(default)]
    admission: AdmissionFile,
    #[serde(default)]
    auth: Vec<AuthFile>,
    #[serde(default)]
    routes: Vec<RouteFile>,
    github: Option<GithubFile>,
    slack: Option<SlackFile>,
    webhook: Option<WebhookFile>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum KindFile {
    #[default]
    Custom,
    Webhook,
    Github,
    Slack,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AdmissionFile {
    #[default]
    Preempt,
    Coalesce,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum AuthFile {
    LocalDevStrict,
    Bearer { token_env: String, principal: Option<String> },
    AllowAll,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteFile {
    // Spans locate each route's own lines; a channel usually declares several.
    method: Spanned<String>,
    path: Spanned<String>,
    description: Option<String>,
    body_schema: Option<Spanned<toml::Value>>,
    query_schema: Option<Spanned<toml::Value>>,
    handler: Option<Spanned<Vec<String>>>,
    timeout: Option<Spanned<DurationValue>>,
    /// Request headers passed to the handler (names, case-insensitive).
    #[serde(default)]
    headers: Vec<String>,
    /// The declarative form: no command, the request is mapped into a message by templates.
    send: Option<Spanned<SendFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendFile {
    message: String,
    continuation_key: Option<String>,
    title: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct GithubFile {
    bot_name: Option<String>,
    #[serde(default)]
    repos: Vec<String>,
    webhook_secret_env: Option<String>,
    #[serde(default)]
    events: Vec<String>,
    handler: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reactions: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reply: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SlackFile {
    env_prefix: Option<String>,
    continuation: Option<String>,
    reply_mode: Option<String>,
    #[serde(default)]
    channel_posts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    socket_mode: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_reasoning: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_tools: Option<bool>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct WebhookFile {
    secret_env: Option<String>,
    signature_header: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    algorithm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature_prefix: Option<String>,
}

pub fn load(src: &SourceFile, id: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<ChannelDef> {
    if !parse::is_valid_name(id) {
        diags.report(Code::InvalidName, Some(&src.rel), None, format!("{}: `{id}` is not a valid channel id", src.rel));
        return None;
    }
    let file: ChannelFile = parse::toml_file(src, diags)?;
    let kind = match file.kind {
        KindFile::Custom => ChannelKind::Custom,
        KindFile::Webhook => ChannelKind::Webhook,
        KindFile::Github => ChannelKind::Github,
        KindFile::Slack => ChannelKind::Slack,
    };
    let settings = kind_settings(&file, kind, src, diags);
    check_choices(&file, src, diags);
    if kind == ChannelKind::Github
        && let Some(handler) = file.github.as_ref().and_then(|g| g.handler.as_ref())
    {
        commands::check_files(handler, &origin.bot_dir, src, "github.handler", src.pos_of_key("handler"), diags);
    }
    if matches!(kind, ChannelKind::Custom | ChannelKind::Webhook) && file.routes.is_empty() {
        diags.report_with_hint(
            Code::MissingField,
            Some(&src.rel),
            None,
            format!("{}: a {} channel needs at least one [[routes]]", src.rel, kind.as_str()),
            "add [[routes]] with method, path and handler",
        );
    }
    let mut seen = HashSet::new();
    let mut routes = Vec::new();
    let mut ok = true;
    for (index, route) in file.routes.into_iter().enumerate() {
        match load_route(route, index, &mut seen, src, origin, diags) {
            Some(route) => routes.push(route),
            None => ok = false,
        }
    }
    let auth = file
        .auth
        .into_iter()
        .map(|a| match a {
            AuthFile::LocalDevStrict => AuthPolicy::LocalDevStrict,
            AuthFile::Bearer { token_env, principal } => AuthPolicy::Bearer { token_env, principal },
            AuthFile::AllowAll => AuthPolicy::AllowAll,
        })
        .collect();
    ok.then(|| ChannelDef {
        id: origin.name(id),
        kind,
        source: origin.source,
        file: src.rel.clone(),
        description: file.description,
        auth,
        admission: match file.admission {
            AdmissionFile::Preempt => Admission::Preempt,
            AdmissionFile::Coalesce => Admission::Coalesce,
        },
        routes,
        settings,
        cwd: origin.bot_dir.clone(),
    })
}

fn load_route(
    route: RouteFile,
    index: usize,
    seen: &mut HashSet<(String, String)>,
    src: &SourceFile,
    origin: &Origin,
    diags: &mut Diagnostics,
) -> Option<RouteDef> {
    let label = format!("{}: routes[{index}]", src.rel);
    let at = |span: std::ops::Range<usize>| -> Option<Pos> { Some(src.pos_at(span.start)) };
    let pos = at(route.path.span());
    let method_pos = at(route.method.span());
    let route_method = route.method.into_inner();
    let route_path = route.path.into_inner();
    let method = route_method.to_ascii_uppercase();
    let mut ok = true;
    if !METHODS.contains(&method.as_str()) {
        diags.report(
            Code::InvalidRoute,
            Some(&src.rel),
            method_pos,
            format!("{label}: method `{route_method}` is not supported"),
        );
        ok = false;
    }
    if !route_path.starts_with('/') || route_path.contains("//") || route_path.contains(char::is_whitespace) {
        diags.report(
            Code::InvalidRoute,
            Some(&src.rel),
            pos,
            format!("{label}: path `{}` must start with / and hold no spaces or empty segments", route_path),
        );
        ok = false;
    }
    if !seen.insert((method.clone(), route_path.clone())) {
        diags.report(
            Code::DuplicateRoute,
            Some(&src.rel),
            pos,
            format!("{label}: {method} {} is declared twice", route_path),
        );
        ok = false;
    }
    if method == "GET"
        && let Some(body) = &route.body_schema
    {
        diags.report_with_hint(
            Code::InvalidRoute,
            Some(&src.rel),
            at(body.span()),
            format!("{label}: GET routes carry no body"),
            "use query_schema for GET routes",
        );
        ok = false;
    }
    let handler_pos = route.handler.as_ref().and_then(|h| at(h.span()));
    let send_pos = route.send.as_ref().and_then(|s| at(s.span()));
    let send = route.send.map(Spanned::into_inner).map(|s| RouteSend {
        message: s.message,
        continuation_key: s.continuation_key,
        title: s.title,
    });
    let handler = route.handler.map(Spanned::into_inner).unwrap_or_default();
    if let Some(send) = &send {
        if !handler.is_empty() {
            diags.report_with_hint(
                Code::InvalidRoute,
                Some(&src.rel),
                send_pos,
                format!("{label}: {method} {} has both `handler` and `send`", route_path),
                "keep `handler` (a command that may send itself) or `send` (the declarative form), not both",
            );
            ok = false;
        }
        if send.message.trim().is_empty() {
            diags.report(Code::MissingField, Some(&src.rel), send_pos, format!("{label}: `send.message` is empty"));
            ok = false;
        }
        for (key, template) in [
            ("message", Some(&send.message)),
            ("continuation_key", send.continuation_key.as_ref()),
            ("title", send.title.as_ref()),
        ] {
            if let Some(problem) = template.and_then(|t| template_problem(t)) {
                diags.report_with_hint(
                    Code::InvalidValue,
                    Some(&src.rel),
                    send_pos,
                    format!("{label}: `send.{key}`: {problem}"),
                    "placeholders look like {{body.field}}, {{params.name}}, {{query.name}} or {{headers.name}}",
                );
                ok = false;
            }
        }
    } else if handler.first().is_none_or(|h| h.trim().is_empty()) {
        diags.report_with_hint(
            Code::MissingField,
            Some(&src.rel),
            pos,
            format!("{label}: {method} {} has no `handler`", route_path),
            "add `handler = [\"program\", \"arg\"]` (it reads the request as JSON on stdin) or a `send` table",
        );
        ok = false;
    } else {
        let key = format!("routes[{index}].handler");
        commands::check_files(&handler, &origin.bot_dir, src, &key, handler_pos, diags);
    }
    let body_schema = route
        .body_schema
        .as_ref()
        .map(|v| schema::check_object_at(v.get_ref(), src, "body_schema", at(v.span()), diags));
    let query_schema = route
        .query_schema
        .as_ref()
        .map(|v| schema::check_object_at(v.get_ref(), src, "query_schema", at(v.span()), diags));
    if matches!(body_schema, Some(None)) || matches!(query_schema, Some(None)) {
        ok = false;
    }
    let timeout = route.timeout.as_ref().map_or(DEFAULT_HANDLER_TIMEOUT, |t| {
        t.get_ref().resolve_at(src, "timeout", at(t.span()), DEFAULT_HANDLER_TIMEOUT, diags)
    });
    ok.then(|| RouteDef {
        method,
        path: route_path,
        description: route.description,
        body_schema: body_schema.flatten(),
        query_schema: query_schema.flatten(),
        handler,
        timeout,
        headers: route.headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
        send,
    })
}

/// Why a `send` template is malformed (an unclosed `{{`, or a placeholder outside `body`,
/// `params`, `query`, `headers`), if it is.
fn template_problem(template: &str) -> Option<String> {
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Some("a `{{` is never closed".into());
        };
        let name = after[..end].trim();
        let root = name.split('.').next().unwrap_or_default();
        if !matches!(root, "body" | "params" | "query" | "headers") || name.split('.').any(str::is_empty) {
            return Some(format!("`{{{{{name}}}}}` is not a placeholder this route can fill"));
        }
        rest = &after[end + 2..];
    }
    None
}

/// Values of the kind tables that must be one of a few words.
fn check_choices(file: &ChannelFile, src: &SourceFile, diags: &mut Diagnostics) {
    let choices: [(&str, Option<&String>, &[&str]); 4] = [
        ("reply", file.github.as_ref().and_then(|g| g.reply.as_ref()), &["comment", "review", "none"]),
        ("algorithm", file.webhook.as_ref().and_then(|w| w.algorithm.as_ref()), &["sha256", "sha512"]),
        ("reply_mode", file.slack.as_ref().and_then(|s| s.reply_mode.as_ref()), &["post"]),
        (
            "continuation",
            file.slack.as_ref().and_then(|s| s.continuation.as_ref()),
            &["slack.dm/v1", "slack.dmthread/v2"],
        ),
    ];
    for (key, value, allowed) in choices {
        if let Some(value) = value
            && !allowed.contains(&value.as_str())
        {
            diags.report_with_hint(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key(key),
                format!("{}: `{key}` is {value:?}", src.rel),
                format!("use one of {}", allowed.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(", ")),
            );
        }
    }
}

/// The kind-specific table as JSON, checking that it matches the channel's kind.
fn kind_settings(
    file: &ChannelFile,
    kind: ChannelKind,
    src: &SourceFile,
    diags: &mut Diagnostics,
) -> Option<serde_json::Value> {
    let tables: [(&str, Option<serde_json::Value>, ChannelKind); 3] = [
        ("github", file.github.as_ref().and_then(|t| serde_json::to_value(t).ok()), ChannelKind::Github),
        ("slack", file.slack.as_ref().and_then(|t| serde_json::to_value(t).ok()), ChannelKind::Slack),
        ("webhook", file.webhook.as_ref().and_then(|t| serde_json::to_value(t).ok()), ChannelKind::Webhook),
    ];
    let mut settings = None;
    for (key, value, owner) in tables {
        let Some(value) = value else { continue };
        if owner == kind {
            settings = Some(value);
        } else {
            diags.report_with_hint(
                Code::UnknownKey,
                Some(&src.rel),
                src.pos_of_key(key),
                format!("{}: [{key}] applies to kind = \"{key}\" channels, this one is \"{}\"", src.rel, kind.as_str()),
                format!("set kind = \"{key}\" or remove the [{key}] table"),
            );
        }
    }
    settings
}
