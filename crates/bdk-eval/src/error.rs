//! The crate's error type: what stops a run from starting or a saved run from being read. A
//! case that fails or times out is never an error: it is a failed case with its reason.

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, EvalError>;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("the project has no evals (add evals/evals.toml and *.eval.toml files)")]
    NoEvals,
    #[error("no eval matches the selection")]
    NothingMatches,
    #[error("eval run {0} is already running")]
    AlreadyRunning(String),
    #[error("eval run {0} not found")]
    RunNotFound(String),
    #[error("eval run {0} is not running")]
    NotRunning(String),
    #[error("`{0}` is not an eval run id")]
    InvalidRunId(String),
    #[error("{}: not a saved eval run: {source}", path.display())]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("eval state: {0}")]
    Store(#[from] bdk_store::Error),
    #[error("building the agent's tools for evals: {0}")]
    Tools(String),
}
