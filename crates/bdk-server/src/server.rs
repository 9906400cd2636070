//! Running the router on a listener, and shutting down in order: stop accepting connections,
//! drain every engine (no new turns; running ones get a grace period, then are cancelled and
//! their final events made durable), then end the live streams so their clients have seen those
//! final events, then wait for the connections to close.

use std::future::Future;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::listen;
use crate::routes::app;
use crate::state::AppState;

/// How long running turns may go on after a shutdown signal before they are cancelled.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(10);

/// How long open connections get to finish once streams have ended.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `state` on `listener` until `shutdown` resolves, then shuts down as the module says.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    if let Ok(local) = listener.local_addr() {
        state.host_tokens.bind(local, state.options.mode);
    }
    let stop_accepting = CancellationToken::new();
    let router = app(state.clone());
    let limits = state.options.connections;
    let server = listen::run(listener, router, limits, stop_accepting.clone());
    let mut server = tokio::spawn(async move {
        server.await;
        Ok::<(), std::io::Error>(())
    });
    let timed = crate::timed::start(&state);
    let channels = crate::channels::start(&state);

    tokio::select! {
        () = shutdown => {}
        result = &mut server => {
            // The server stopped on its own: an accept loop error.
            return flatten(result);
        }
    }

    tracing::info!(grace_ms = grace.as_millis() as u64, "shutting down: no new connections; draining turns");
    stop_accepting.cancel();
    channels.cancel();
    crate::timed::stop(&state, timed).await;
    join_all(state.agents.iter().map(|agent| agent.engine.drain(grace))).await;
    join_all(state.agents.iter().map(|agent| agent.engine.close_tools())).await;
    tracing::info!("turns drained; ending live streams");
    state.streams_end.cancel();
    match tokio::time::timeout(CLOSE_TIMEOUT, &mut server).await {
        Ok(result) => flatten(result)?,
        Err(_) => {
            tracing::warn!("connections still open after {CLOSE_TIMEOUT:?}; closing them");
            server.abort();
        }
    }
    tracing::info!("shutdown complete");
    Ok(())
}

fn flatten(result: Result<std::io::Result<()>, tokio::task::JoinError>) -> std::io::Result<()> {
    result.map_err(std::io::Error::other)?
}

/// Resolves on ctrl-c (SIGINT) or SIGTERM. The handlers are installed when this is called, not
/// when the future is first polled: call it before announcing the server, so a signal sent as
/// soon as `listening on` is printed is handled (a drain), not the default (the process dies).
/// Must be called inside a Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let install = |kind: SignalKind, name: &'static str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}");
                None
            }
        };
        async fn received(stream: Option<Signal>) {
            match stream {
                Some(mut stream) => {
                    stream.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let term = install(SignalKind::terminate(), "SIGTERM");
        let int = install(SignalKind::interrupt(), "ctrl-c");
        async move {
            tokio::select! {
                () = received(int) => tracing::info!("ctrl-c received"),
                () = received(term) => tracing::info!("SIGTERM received"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
        tracing::info!("ctrl-c received");
    }
}
