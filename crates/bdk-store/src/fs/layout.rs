//! Where everything lives under one agent's state directory (`<state_root>/<slug>/`). Paths only.

use std::path::{Path, PathBuf};

use bdk_protocol::{CallId, SessionId};

/// The state directory layout of one agent:
///
/// ```text
/// <root>/sessions/<id>/session.json     metadata
/// <root>/sessions/<id>/events.ndjson    the durable event log
/// <root>/sessions/<id>/workspace/       the harness working directory
/// <root>/traces/<sessionId>.ndjson      traces written by `run`
/// <root>/tool-calls/<callId>/           scratch workspaces of direct tool calls
/// <root>/kv/<key>.json                  host.kv values shared by every session
/// <root>/files/<path>                    host.files shared by every session
/// <root>/sessions/<id>/kv/<key>.json     one session's own host.kv values
/// <root>/sessions/<id>/files/<path>      one session's own host.files
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout rooted at `root` (an agent's own state directory).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// `<state_root>/<slug>`; `None` when `slug` is not one plain path segment.
    pub fn for_agent(state_root: &Path, slug: &str) -> Option<Self> {
        let plain = !slug.is_empty()
            && !slug.starts_with('.')
            && slug.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        plain.then(|| Layout::new(state_root.join(slug)))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    pub fn session_dir(&self, id: &SessionId) -> PathBuf {
        self.sessions_dir().join(id.as_str())
    }

    pub fn session_json(&self, id: &SessionId) -> PathBuf {
        self.session_dir(id).join("session.json")
    }

    pub fn events_path(&self, id: &SessionId) -> PathBuf {
        self.session_dir(id).join("events.ndjson")
    }

    pub fn workspace_dir(&self, id: &SessionId) -> PathBuf {
        self.session_dir(id).join("workspace")
    }

    pub fn traces_dir(&self) -> PathBuf {
        self.root.join("traces")
    }

    pub fn trace_path(&self, id: &SessionId) -> PathBuf {
        self.traces_dir().join(format!("{id}.ndjson"))
    }

    pub fn tool_calls_dir(&self) -> PathBuf {
        self.root.join("tool-calls")
    }

    pub fn call_dir(&self, call: &CallId) -> PathBuf {
        self.tool_calls_dir().join(call.as_str())
    }

    pub fn kv_dir(&self) -> PathBuf {
        self.root.join("kv")
    }

    pub fn files_dir(&self) -> PathBuf {
        self.root.join("files")
    }

    /// A session's own `host.kv` folder (deleted with the session).
    pub fn session_kv_dir(&self, id: &SessionId) -> PathBuf {
        self.session_dir(id).join("kv")
    }

    /// A session's own `host.files` folder (deleted with the session).
    pub fn session_files_dir(&self, id: &SessionId) -> PathBuf {
        self.session_dir(id).join("files")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_reference_layout() {
        let layout = Layout::for_agent(Path::new("/state"), "weather").unwrap();
        let id = SessionId::parse("ses_1").unwrap();
        assert_eq!(layout.events_path(&id), Path::new("/state/weather/sessions/ses_1/events.ndjson"));
        assert_eq!(layout.workspace_dir(&id), Path::new("/state/weather/sessions/ses_1/workspace"));
        assert_eq!(layout.trace_path(&id), Path::new("/state/weather/traces/ses_1.ndjson"));
        let call = CallId::parse("tool_x_1").unwrap();
        assert_eq!(layout.call_dir(&call), Path::new("/state/weather/tool-calls/tool_x_1"));
        assert!(Layout::for_agent(Path::new("/s"), "../x").is_none());
        assert!(Layout::for_agent(Path::new("/s"), "a/b").is_none());
        assert!(Layout::for_agent(Path::new("/s"), "").is_none());
    }
}
