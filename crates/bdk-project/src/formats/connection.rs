//! `mcp-connections/<name>.toml` and `host-connections/<name>.toml`: MCP servers over stdio,
//! streamable HTTP, or a peer agent mounted in the same host. `${NAME}` placeholders stay
//! verbatim here and are resolved from the environment each time a client opens.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::{Advertise, ConnectionDef, ConnectionScope, Transport};
use crate::parse::{self, DurationValue};
use crate::source::SourceFile;

use super::Origin;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionFile {
    description: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    agent: Option<String>,
    #[serde(default)]
    advertise_tools: AdvertiseFile,
    /// Only these server tools are reachable (by the server's own names).
    allow_tools: Option<Vec<String>>,
    /// These server tools are never reachable.
    #[serde(default)]
    deny_tools: Vec<String>,
    /// Each call's limit.
    timeout: Option<DurationValue>,
}

/// An MCP call times out after this long unless `timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AdvertiseFile {
    Flag(bool),
    Names(Vec<String>),
}

impl Default for AdvertiseFile {
    fn default() -> Self {
        AdvertiseFile::Flag(false)
    }
}

pub fn load(
    src: &SourceFile,
    name: &str,
    scope: ConnectionScope,
    origin: &Origin,
    diags: &mut Diagnostics,
) -> Option<ConnectionDef> {
    if !parse::is_valid_name(name) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{name}` is not a valid connection name", src.rel),
        );
        return None;
    }
    let file: ConnectionFile = parse::toml_file(src, diags)?;
    let given = [file.command.is_some(), file.url.is_some(), file.agent.is_some()].iter().filter(|b| **b).count();
    if given != 1 {
        let what = if given == 0 { "none" } else { "more than one" };
        diags.report(
            Code::ConnectionTransport,
            Some(&src.rel),
            None,
            format!("{}: connection `{name}` gives {what} of `command`, `url` and `agent`", src.rel),
        );
        return None;
    }
    if file.command.is_none() && (!file.args.is_empty() || !file.env.is_empty()) {
        diags.report_with_hint(
            Code::ConnectionTransport,
            Some(&src.rel),
            src.pos_of_key(if file.args.is_empty() { "env" } else { "args" }),
            format!("{}: `args` and `env` apply to stdio connections only", src.rel),
            "use `headers` for HTTP connections",
        );
    }
    if file.url.is_none() && !file.headers.is_empty() {
        diags.report_with_hint(
            Code::ConnectionTransport,
            Some(&src.rel),
            src.pos_of_key("headers"),
            format!("{}: `headers` apply to HTTP connections only", src.rel),
            "use `env` for stdio connections",
        );
    }
    let transport = if let Some(command) = file.command {
        if command.trim().is_empty() {
            diags.report(
                Code::ConnectionTransport,
                Some(&src.rel),
                src.pos_of_key("command"),
                format!("{}: `command` is empty", src.rel),
            );
            return None;
        }
        Transport::Stdio { command, args: file.args, env: file.env.into_iter().collect() }
    } else if let Some(url) = file.url {
        if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${")) {
            diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key("url"),
                format!("{}: `url` must start with http:// or https://", src.rel),
            );
            return None;
        }
        Transport::Http { url, headers: file.headers.into_iter().collect() }
    } else {
        let slug = file.agent.unwrap_or_default();
        if !parse::is_valid_name(&slug) {
            diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key("agent"),
                format!("{}: `agent = \"{slug}\"` is not an agent slug", src.rel),
            );
            return None;
        }
        Transport::Agent { slug }
    };
    let advertise = match file.advertise_tools {
        AdvertiseFile::Flag(false) => Advertise::None,
        AdvertiseFile::Flag(true) => Advertise::All,
        AdvertiseFile::Names(names) => Advertise::Only(names),
    };
    if scope == ConnectionScope::Host && advertise != Advertise::None {
        diags.report_with_hint(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("advertise_tools"),
            format!("{}: host connections are never shown to the model, so they cannot advertise tools", src.rel),
            "move the file to mcp-connections/ or drop advertise_tools",
        );
    }
    let placeholders = transport_placeholders(&transport);
    let timeout = parse::duration(file.timeout.as_ref(), src, "timeout", DEFAULT_TIMEOUT, diags);
    if let Advertise::Only(names) = &advertise {
        for name in names {
            let denied =
                file.deny_tools.contains(name) || file.allow_tools.as_ref().is_some_and(|allow| !allow.contains(name));
            if denied {
                diags.report_with_hint(
                    Code::InvalidValue,
                    Some(&src.rel),
                    src.pos_of_key("advertise_tools"),
                    format!("{}: `advertise_tools` names `{name}`, which `allow_tools`/`deny_tools` exclude", src.rel),
                    "advertise only tools the lists admit",
                );
            }
        }
    }
    Some(ConnectionDef {
        name: origin.name(name),
        scope,
        source: origin.source,
        file: src.rel.clone(),
        description: file.description,
        transport,
        advertise,
        placeholders,
        namespace: origin.namespace.clone(),
        allow_tools: file.allow_tools,
        deny_tools: file.deny_tools,
        timeout,
    })
}

fn transport_placeholders(transport: &Transport) -> Vec<String> {
    let texts: Vec<&str> = match transport {
        Transport::Stdio { command, args, env } => std::iter::once(command.as_str())
            .chain(args.iter().map(String::as_str))
            .chain(env.iter().map(|(_, v)| v.as_str()))
            .collect(),
        Transport::Http { url, headers } => {
            std::iter::once(url.as_str()).chain(headers.iter().map(|(_, v)| v.as_str())).collect()
        }
        Transport::Agent { .. } => Vec::new(),
    };
    let mut names: Vec<String> = texts.into_iter().flat_map(parse::placeholders).collect();
    names.sort();
    names.dedup();
    names
}
