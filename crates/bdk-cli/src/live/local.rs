//! One project's engine, in-process, on the state directory `serve` uses: what `run` and
//! `chat --dir` talk to. Sessions belong to the loopback principal, so `serve --dev` lists them.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use bdk_engine::{AgentConfig, Engine, EngineOptions, Principal};
use bdk_model::ModelLayer;
use bdk_protocol::SessionId;
use bdk_server::mount;
use bdk_store::Stores;
use bdk_store::record::SessionStatus;

use super::backend::{Backend, Events, Send, Sent};
use crate::Embed;

/// The principal CLI sessions belong to: the same as loopback callers of `serve`.
pub const PRINCIPAL: &str = bdk_server::auth::LOCAL_PRINCIPAL;
/// The channel recorded on CLI sessions.
pub const CHANNEL: &str = "cli";

/// An engine for one project, with the stores it writes to.
pub struct Local {
    pub engine: Engine,
    pub stores: Stores,
    pub principal: Principal,
    /// The agent's state directory.
    pub dir: std::path::PathBuf,
}

impl Local {
    /// Opens the project's state directory (`<state_root>/<slug>/`, default `<project>/.bdk/`)
    /// and builds its engine with what `embed` adds. Unlike `serve`, it runs no recovery: a
    /// `serve --dev` on the same state directory may be running turns, and closing them from
    /// here would be wrong (as for `call --dir`).
    pub async fn open(
        project: &bdk_project::Project,
        state_root: Option<&Path>,
        embed: &Embed,
        telemetry: bdk_telemetry::Telemetry,
    ) -> anyhow::Result<Self> {
        let dir = mount::state_dir(project, state_root);
        let (resolved, provider) = mount::provider(project, ModelLayer::default());
        let store = bdk_server::backend::open_fs(project, &dir)
            .with_context(|| format!("opening the state directory {}", dir.display()))?;
        let stores = store.stores();
        let options = EngineOptions {
            price: resolved.price,
            capabilities: bdk_engine::capabilities(project, &dir),
            artifacts: Some(std::sync::Arc::new(store.clone())),
            telemetry,
            ..EngineOptions::default()
        };
        let config = AgentConfig::from_project(project);
        let tools = embed.registry(project, &dir)?;
        let engine = Engine::with_options(config, stores.clone(), provider, tools, options);
        Ok(Self { engine, stores, principal: Principal::new(PRINCIPAL), dir })
    }

    /// Waits (up to two seconds) until `session.json` records the status the log's closing
    /// event tells: the actor writes it just after the event, and a process that exits at
    /// once would leave `running` behind.
    pub async fn settle_status(&self, id: &SessionId) -> Option<SessionStatus> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let status = self.engine.session(id, &self.principal).await.ok().and_then(|r| r.status);
            if status.is_some_and(|s| s != SessionStatus::Running) || tokio::time::Instant::now() >= deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Backend for Local {
    /// Starts a session with the message, or sends it to an existing one (rotating its token).
    async fn send(&self, send: Send<'_>) -> anyhow::Result<Sent> {
        let Some(id) = send.session else {
            let started = self
                .engine
                .start_session(bdk_engine::StartSession {
                    message: send.message.to_string(),
                    principal: self.principal.clone(),
                    channel: CHANNEL.into(),
                    continuation_key: None,
                    mode: send.mode,
                    title: None,
                    dry_run: send.dry_run,
                    as_of: None,
                    purpose: Some(send.purpose.into()),
                    workspace_files: Vec::new(),
                })
                .await?;
            return Ok(Sent { id: started.session_id, from: 0, token: started.continuation_token });
        };
        let record = self.engine.session(id, &self.principal).await.map_err(|e| match e {
            bdk_engine::EngineError::SessionNotFound(_) => {
                anyhow::anyhow!("session {id} not found in {}", self.dir.display())
            }
            other => other.into(),
        })?;
        let token = match send.token {
            Some(token) => token.to_string(),
            None => record.continuation_token.unwrap_or_default(),
        };
        let from = self.stores.events.len(id).await?;
        let accepted = self
            .engine
            .follow_up(
                id,
                bdk_engine::FollowUp {
                    message: send.message.to_string(),
                    principal: self.principal.clone(),
                    continuation_token: token,
                    admission: bdk_engine::Admission::default(),
                    workspace_files: Vec::new(),
                },
            )
            .await?;
        Ok(Sent { id: id.clone(), from, token: accepted.continuation_token })
    }

    async fn follow(&self, id: &SessionId, from: u64) -> anyhow::Result<Events> {
        let mut stream = self.engine.follow(id, &self.principal, from).await?;
        // The follower's `next` is not cancel-safe: a task owns it and forwards into a channel.
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let stop = event.is_err();
                if tx.send(event.map(|e| (*e).clone()).map_err(anyhow::Error::from)).is_err() || stop {
                    break;
                }
            }
        });
        Ok(events)
    }

    async fn resolve(
        &self,
        id: &SessionId,
        call: &bdk_protocol::CallId,
        decision: bdk_protocol::event::ApprovalDecision,
    ) -> anyhow::Result<()> {
        self.engine.resolve_approval(id, call, decision, &self.principal).await?;
        Ok(())
    }

    async fn stop(&self, id: &SessionId) -> anyhow::Result<()> {
        Ok(self.engine.stop(id, &self.principal).await?)
    }

    async fn cost(&self, id: &SessionId) -> anyhow::Result<bdk_engine::CostReport> {
        Ok(self.engine.cost(id, &self.principal).await?)
    }

    async fn trace(&self, id: &SessionId) -> anyhow::Result<String> {
        Ok(self.write_trace(id).await?.display().to_string())
    }

    async fn settle(&self, id: &SessionId) {
        self.settle_status(id).await;
    }

    async fn status(&self, id: &SessionId) -> anyhow::Result<String> {
        let record = self.engine.session(id, &self.principal).await.map_err(|e| match e {
            bdk_engine::EngineError::SessionNotFound(_) => {
                anyhow::anyhow!("session {id} not found in {}", self.dir.display())
            }
            other => other.into(),
        })?;
        Ok(record.status.map_or("running", |s| s.as_str()).to_string())
    }
}

impl Local {
    /// Writes every event of the session to `traces/<id>.ndjson` and returns the path.
    pub async fn write_trace(&self, id: &SessionId) -> anyhow::Result<std::path::PathBuf> {
        let events = self.engine.events(id, &self.principal, 0).await?;
        let path = self.stores.workspaces.trace_path(id);
        let mut out = Vec::with_capacity(events.len() * 256);
        for event in &events {
            serde_json::to_writer(&mut out, event)?;
            out.push(b'\n');
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}
