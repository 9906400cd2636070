//! What the end of a spawned task means, decided in one place for the engine's tasks that
//! nobody aborts (tool calls, subagent children, turns): a cancelled task was dropped by the
//! runtime shutting down, so the process is going away; any other failure is a panic.
//!
//! It does not decide what to do about it; each caller does (for a shutdown: write nothing, as a
//! killed process would not, and let the next start restore or close the turn from what is
//! durable; for a panic: report an internal failure).

use tokio::task::JoinError;

/// How a task that nobody aborts ended.
#[derive(Debug)]
pub(crate) enum Ended<T> {
    /// It returned this.
    Returned(T),
    /// The runtime is shutting down and dropped it: the process is going away.
    ShuttingDown,
    /// It panicked.
    Panicked(JoinError),
}

/// Reads a joined task's result. Only for tasks nobody aborts: an aborted task is cancelled
/// too, and would read as the runtime shutting down.
pub(crate) fn ended<T>(joined: Result<T, JoinError>) -> Ended<T> {
    match joined {
        Ok(value) => Ended::Returned(value),
        Err(error) if error.is_cancelled() => Ended::ShuttingDown,
        Err(error) => Ended::Panicked(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_shutting_down_is_told_apart_from_a_panic() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let panicked = runtime.block_on(runtime.spawn(async { panic!("boom") }));
        assert!(matches!(ended::<()>(panicked), Ended::Panicked(_)));
        let returned = runtime.block_on(runtime.spawn(async { 7 }));
        assert!(matches!(ended(returned), Ended::Returned(7)));
        // A task still pending when its runtime shuts down is cancelled.
        let pending = runtime.spawn(std::future::pending::<()>());
        drop(runtime);
        let other = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(matches!(ended(other.block_on(pending)), Ended::ShuttingDown));
    }
}
