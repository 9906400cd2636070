//! `bdk call NAME (--dir D | --url U) --input JSON [--session ID | --continuation-token T]`: one
//! direct tool call, no model turn. `--url` posts to a running server's `POST /v1/tools/:name`.
//! `--dir` does what the reference's CLI does: it starts an ephemeral server in-process on the
//! project's state directory (its tools, the host services, the same route and auth, on a
//! loopback port picked by the OS), posts to it, and stops it. Both ways stdout gets the route's
//! JSON envelope (pretty-printed), success or error, so scripts read one shape.
//!
//! Exit codes: 0 the tool ran; 1 it ran and reported `isError: true` (or, with `--dir`, the
//! project has error diagnostics); 3 the answer is an error code (`unknown_tool`,
//! `session_busy`, ...), or no answer could be had (the message goes to stderr).
//!
//! The ephemeral server recovers nothing: a `bdk serve` may be running on the same state, and
//! closing its open turns would be wrong. Binding `--dir` calls to a session while a server
//! serves that state is not safe (two writers to one log); use `--url` then.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use anyhow::{Context as _, bail};
use bdk_engine::{AgentConfig, Engine, EngineOptions};
use bdk_model::ModelLayer;
use bdk_protocol::http::ToolCallRequest;
use bdk_server::{Agent, AppState, HostTokens, LogBuffer, Mode, ServeOptions, mount};
use bdk_store::FsStore;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::Embed;
use crate::cli::CallArgs;
use crate::exit::Exit;
use crate::report;

/// How long connecting may take; the call itself may run as long as the tool's timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the ephemeral server waits for anything still running when the call is done.
const EPHEMERAL_GRACE: Duration = Duration::from_secs(5);

pub fn run(args: &CallArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let input = match read_input(&args.input) {
        Ok(input) => input,
        Err(message) => {
            print_envelope(&json!({"ok": false, "error": "invalid_request", "message": message}))?;
            return Ok(Exit::Failure);
        }
    };
    let body = ToolCallRequest {
        input: Some(input),
        session_id: args.session.clone(),
        continuation_token: args.continuation_token.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let (status, envelope) = match &args.url {
        Some(url) => runtime.block_on(post(url, &args.name, &body, args.token.as_deref()))?,
        None => {
            let dir = args.dir.clone().unwrap_or_else(|| std::path::PathBuf::from("."));
            let discovery = embed.discover(std::slice::from_ref(&dir));
            if discovery.has_errors() {
                report::emit_err(&report::diagnostics_text(&discovery));
                return Ok(Exit::ProjectErrors);
            }
            let mut projects = discovery.projects;
            if projects.len() != 1 {
                bail!("`bdk call --dir` needs exactly one project; {} holds {}", dir.display(), projects.len());
            }
            let project = projects.remove(0);
            let export = crate::otel::Export::from_env(&project.slug)?;
            let called = runtime.block_on(call_ephemeral(project, args, embed, &body, export.telemetry()));
            drop(export);
            called?
        }
    };
    print_envelope(&envelope)?;
    Ok(exit_for(status, &envelope))
}

/// 0 for a tool that ran, 1 for one that reported `isError`, 3 for an error code.
fn exit_for(status: u16, envelope: &Value) -> Exit {
    let ran = (200..300).contains(&status) && envelope["ok"] == json!(true);
    match (ran, envelope["isError"] == json!(true)) {
        (true, false) => Exit::Ok,
        (true, true) => Exit::ProjectErrors,
        (false, _) => Exit::Failure,
    }
}

/// `--input`: JSON text, or `-` for stdin.
fn read_input(raw: &str) -> Result<Value, String> {
    let text = if raw == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("reading --input from stdin: {e}"))?;
        text
    } else {
        raw.to_owned()
    };
    serde_json::from_str(&text).map_err(|e| format!("--input is not valid JSON: {e}"))
}

/// The route under an agent's base URL (`http://HOST:PORT/<slug>`, or the root in single mode);
/// a trailing `/` or `/v1` is tolerated.
fn tool_url(base: &str, tool: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/tools/{tool}")
}

/// Posts the call; returns the status and the JSON answer.
async fn post(base: &str, tool: &str, body: &ToolCallRequest, token: Option<&str>) -> anyhow::Result<(u16, Value)> {
    let url = tool_url(base, tool);
    let client = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().context("building the client")?;
    let mut request = client.post(&url).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let bytes = response.bytes().await.with_context(|| format!("reading the answer of POST {url}"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(envelope) if envelope.get("ok").is_some() => Ok((status.as_u16(), envelope)),
        _ => bail!("POST {url}: HTTP {status}, and the answer is not a BDK envelope"),
    }
}

/// Mounts `project` on its state (no recovery), serves it on `127.0.0.1:0` in single mode with
/// the default auth (the caller is principal `local`, as under `bdk serve`), posts the call, and
/// stops the server.
async fn call_ephemeral(
    project: bdk_project::Project,
    args: &CallArgs,
    embed: &Embed,
    body: &ToolCallRequest,
    telemetry: bdk_telemetry::Telemetry,
) -> anyhow::Result<(u16, Value)> {
    let dir = mount::state_dir(&project, args.state_root.as_deref());
    let (resolved, provider) = mount::provider(&project, ModelLayer::default());
    let host_tokens = HostTokens::new();
    let options = EngineOptions {
        price: resolved.price,
        host: Some(host_tokens.authority(&project.slug)),
        telemetry: telemetry.clone(),
        ..EngineOptions::default()
    };
    let tools = embed.registry(&project, &dir)?;
    let store = FsStore::open(&dir).with_context(|| format!("opening the state directory {}", dir.display()))?;
    let engine = Engine::with_options(AgentConfig::from_project(&project), store.stores(), provider, tools, options);
    let state = AppState::new(
        vec![Agent::new(project, engine)],
        ServeOptions { mode: Mode::Single, playground: false, docs: false, ..ServeOptions::default() },
        LogBuffer::default(),
    )
    .with_host_tokens(host_tokens)
    .with_telemetry(telemetry, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding a loopback port")?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(bdk_server::serve(
        listener,
        state,
        async move {
            let _ = stopped.await;
        },
        EPHEMERAL_GRACE,
    ));
    let answer = post(&format!("http://{addr}"), &args.name, body, None).await;
    let _ = stop.send(());
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "the ephemeral server stopped with an error"),
        Err(error) => tracing::warn!(%error, "the ephemeral server task failed"),
    }
    answer
}

fn print_envelope(envelope: &Value) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, envelope)?;
    stdout.write_all(b"\n")?;
    stdout.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_urls_are_normalised() {
        for base in ["http://h:1/hello", "http://h:1/hello/", "http://h:1/hello/v1", "http://h:1/hello/v1/"] {
            assert_eq!(tool_url(base, "word_count"), "http://h:1/hello/v1/tools/word_count");
        }
    }

    #[test]
    fn exit_codes_follow_the_envelope() {
        assert_eq!(exit_for(200, &json!({"ok": true, "isError": false})), Exit::Ok);
        assert_eq!(exit_for(200, &json!({"ok": true, "isError": true})), Exit::ProjectErrors);
        assert_eq!(exit_for(404, &json!({"ok": false, "error": "unknown_tool"})), Exit::Failure);
        assert_eq!(exit_for(409, &json!({"ok": false, "error": "session_busy"})), Exit::Failure);
    }

    #[test]
    fn input_must_be_json() {
        assert_eq!(read_input(r#"{"a": 1}"#), Ok(json!({"a": 1})));
        assert!(read_input("{a").unwrap_err().contains("not valid JSON"));
    }
}
