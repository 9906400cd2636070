//! The route catalog: one registration per route the router serves, with what the OpenAPI
//! document says about it. Adding a route means adding one line here; the `openapi` tests fail
//! until a route in the router is listed (and until a listed one is served).
//!
//! Paths are written as the route modules write them (axum's `{param}` and `{*rest}`), relative
//! to the agent's base path for [`Scope::Agent`] routes.

use bdk_protocol::http::{FollowUpRequest, SessionResponse, StartSessionRequest, ToolCallRequest, ToolCallResponse};

use super::op::{Auth, Op, When, op};

/// Every route, in the order the document lists them.
pub fn catalog() -> Vec<Op> {
    vec![
        // Host routes: above every agent (the root of the single layout).
        op("GET", "/", "Index of the mounted agents (HTML)").host().when(When::Playground).html().open().tag("web"),
        op("GET", "/v1/agents", "The mounted agents as JSON")
            .host()
            .multi()
            .when(When::Playground)
            .object()
            .open()
            .tag("agents"),
        op("GET", "/v1/health", "Host health").host().multi().object().open().tag("health"),
        op("GET", "/v1/openapi.json", "This OpenAPI document").host().object().open().tag("web"),
        op("GET", "/metrics", "Prometheus text metrics").host().when(When::Metrics).any().open().tag("health"),
        op("GET", "/docs", "The documentation site: README").host().when(When::Docs).html().open().tag("web"),
        op("GET", "/docs/{*path}", "A documentation page").host().when(When::Docs).html().open().not_found().tag("web"),
        op("GET", "/playground", "The playground (single layout) or a way to it")
            .host()
            .multi()
            .when(When::Playground)
            .redirect()
            .open()
            .tag("web"),
        // Agent routes.
        op("GET", "/playground", "The playground web app").when(When::Playground).html().open().tag("web"),
        op("GET", "/playground/assets/{file}", "A playground asset")
            .when(When::Playground)
            .any()
            .open()
            .not_found()
            .tag("web"),
        op("GET", "/v1/health", "Agent health").object().open().tag("health"),
        op("GET", "/v1/meta", "Agent name and version").object().open().tag("agents"),
        op("GET", "/v1/info", "Everything discovered about the agent").object().tag("agents"),
        op("GET", "/v1/logs", "Recent server log lines")
            .query("after", "integer", "Only lines after this cursor.")
            .query("limit", "integer", "At most this many lines (up to 1000).")
            .object()
            .tag("agents"),
        op("POST", "/v1/session", "Start a session")
            .body::<StartSessionRequest>()
            .json::<SessionResponse>()
            .tag("sessions"),
        op("POST", "/v1/session/{session_id}", "Follow up with the continuation token")
            .body::<FollowUpRequest>()
            .json::<SessionResponse>()
            .not_found()
            .conflict()
            .tag("sessions"),
        op("GET", "/v1/session/{session_id}/stream", "The session's events, replayed then live (NDJSON)")
            .start_index()
            .ndjson()
            .not_found()
            .tag("sessions"),
        op("GET", "/v1/session/{session_id}/events", "The session's recorded events (NDJSON)")
            .start_index()
            .ndjson()
            .not_found()
            .tag("sessions"),
        op("POST", "/v1/session/{session_id}/stop", "Stop the running turn").object().not_found().tag("sessions"),
        op("GET", "/v1/session/{session_id}/cost", "Usage and estimated cost per turn")
            .object()
            .not_found()
            .tag("sessions"),
        op("GET", "/v1/session/{session_id}/approvals", "Tool calls parked for approval")
            .object()
            .not_found()
            .tag("approvals"),
        op("POST", "/v1/session/{session_id}/approvals/{call_id}", "Approve or deny a parked call")
            .body_object(&["decision"])
            .object()
            .not_found()
            .tag("approvals"),
        op("GET", "/v1/sessions", "The caller's sessions").object().tag("sessions"),
        op("POST", "/v1/tools/{name}", "Call a tool without a model turn")
            .body::<ToolCallRequest>()
            .json::<ToolCallResponse>()
            .not_found()
            .conflict()
            .tag("tools"),
        op("GET", "/v1/abs", "A/B experiments with assignments and per-arm totals").object().tag("abs"),
        op("GET", "/v1/artifacts", "The caller's artifacts, newest-updated first")
            .query("kind", "string", "Only artifacts of this kind.")
            .session_id_query()
            .query("limit", "integer", "At most this many artifacts.")
            .object()
            .tag("artifacts"),
        op("GET", "/v1/artifacts/{id}/content", "Download an artifact's content").any().not_found().tag("artifacts"),
        op("GET", "/v1/dev/evals", "The discovered evals").object().not_found().tag("evals"),
        op("GET", "/v1/dev/evals/runs", "Eval runs, newest first").object().not_found().tag("evals"),
        op("POST", "/v1/dev/evals/runs", "Start an eval run")
            .body_object(&[])
            .accepted()
            .not_found()
            .conflict()
            .tag("evals"),
        op("GET", "/v1/dev/evals/runs/{run_id}", "One eval run").object().not_found().tag("evals"),
        op("POST", "/v1/dev/evals/runs/{run_id}/cancel", "Cancel a running eval run")
            .object()
            .not_found()
            .conflict()
            .tag("evals"),
        op("POST", "/v1/dev/schedules/{id}", "Fire a schedule now (--dev)")
            .when(When::Dev)
            .object()
            .not_found()
            .tag("schedules"),
        op("GET", "/v1/dev/reminders", "Pending reminders (--dev)")
            .when(When::Dev)
            .session_id_query()
            .object()
            .tag("reminders"),
        op("POST", "/v1/dev/reminders/{id}", "Fire a reminder now (--dev)")
            .when(When::Dev)
            .object()
            .not_found()
            .tag("reminders"),
        op("POST", "/v1/internal/schedules/{id}/fire", "Fire a schedule (external scheduler)")
            .when(When::NoControlPlane)
            .object()
            .not_found()
            .tag("schedules"),
        op("POST", "/v1/internal/reminders/{id}/fire", "Fire a reminder (external scheduler)")
            .when(When::NoControlPlane)
            .object()
            .not_found()
            .tag("reminders"),
        // Host services: reached by tool commands with their per-call host token.
        op("GET", "/v1/host/session", "The calling tool's session").auth(Auth::HostToken).object().tag("host"),
        op("POST", "/v1/host/kv/get", "Read a key").auth(Auth::HostToken).body_object(&[]).object().tag("host"),
        op("POST", "/v1/host/kv/put", "Write a key").auth(Auth::HostToken).body_object(&[]).object().tag("host"),
        op("POST", "/v1/host/kv/delete", "Delete a key").auth(Auth::HostToken).body_object(&[]).object().tag("host"),
        op("POST", "/v1/host/kv/list", "List keys").auth(Auth::HostToken).body_object(&[]).object().tag("host"),
        op("POST", "/v1/host/files/read", "Read a stored file")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/files/write", "Write a stored file")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/files/delete", "Delete a stored file")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/files/list", "List stored files")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/send", "Start or resume a session on a channel")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/call-tool", "Call another tool")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/reminders/create", "Create a reminder")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/reminders/list", "List reminders")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/reminders/cancel", "Cancel a reminder")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("GET", "/v1/host/mcp/servers", "The agent's MCP connections").auth(Auth::HostToken).object().tag("host"),
        op("POST", "/v1/host/mcp/tools", "List an MCP server's tools")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/mcp/call", "Call an MCP server's tool")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/artifacts/tag", "Tag an artifact")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/artifacts/list", "List the caller's artifacts")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/otel/metric", "Record a metric of host code")
            .auth(Auth::HostToken)
            .body_object(&["name", "value"])
            .object()
            .tag("host"),
        op("POST", "/v1/host/otel/tag", "Tag the calling session's spans")
            .auth(Auth::HostToken)
            .body_object(&["key", "value"])
            .object()
            .tag("host"),
        op("POST", "/v1/host/github/comment", "Comment on the calling session's pull request")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        op("POST", "/v1/host/github/review", "Review the calling session's pull request")
            .auth(Auth::HostToken)
            .body_object(&[])
            .object()
            .tag("host"),
        // MCP: streamable HTTP (JSON-RPC bodies; answers JSON or an SSE stream; GET and DELETE
        // answer 405, the server keeps no MCP sessions).
        op("POST", "/v1/mcp", "The agent as an MCP server (ask, check, call_tool)").body_object(&[]).any().tag("mcp"),
        op("POST", "/v1/mcp/tools", "The agent's tools as an MCP server").body_object(&[]).any().tag("mcp"),
        // Channels: each verifies its own signature or token, never the auth chain.
        op("POST", "/v1/channels/{channel}", "A channel delivery (webhook, Slack events, GitHub)")
            .open()
            .body_object(&[])
            .any()
            .not_found()
            .tag("channels"),
        op("POST", "/v1/channels/{channel}/{*rest}", "A channel delivery on a sub-path")
            .open()
            .body_object(&[])
            .any()
            .not_found()
            .tag("channels"),
        // Channels: GitHub deliveries fanned out to every GitHub channel (direct loopback only).
        op("POST", "/v1/webhooks/github", "Fan a GitHub delivery out to every GitHub channel")
            .host()
            .open()
            .body_object(&[])
            .object()
            .tag("channels"),
    ]
}
