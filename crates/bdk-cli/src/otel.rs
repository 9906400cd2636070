//! `OTEL_*` export for the commands that run turns in this process and then exit (`run`,
//! `chat`, `call --dir`, `eval`): the same variables and exporters as `serve`, and a guard that
//! flushes and stops them when the command ends, so a short-lived process loses no span.

use anyhow::Context as _;
use bdk_telemetry::Telemetry;
use bdk_telemetry::export::Installed;

/// The installed exporters (nothing when no `OTEL_*` variable asks). Dropping it flushes them:
/// create it before the runtime and keep it until the command has finished.
#[derive(Debug)]
pub struct Export(Installed);

impl Export {
    /// Reads the `OTEL_*` variables (`default_service`: the agent's slug) and installs what
    /// they ask for. A set but unusable variable is an error naming it.
    pub fn from_env(default_service: &str) -> anyhow::Result<Self> {
        let config = bdk_telemetry::OtelConfig::from_env(default_service)
            .map_err(|e| anyhow::anyhow!("telemetry: {e} (see docs/telemetry.md)"))?;
        for warning in config.iter().flat_map(|c| c.warnings.iter()) {
            eprintln!("warning: telemetry: {warning}");
        }
        let installed =
            bdk_telemetry::export::install(config.as_ref(), false, env!("CARGO_PKG_VERSION")).context("telemetry")?;
        Ok(Self(installed))
    }

    /// The handle the engine records on (disabled when nothing is exported).
    pub fn telemetry(&self) -> Telemetry {
        self.0.telemetry.clone()
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        // Blocks until the batch span processor and the metric reader have sent what they hold.
        self.0.shutdown();
    }
}
