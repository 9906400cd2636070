//! Each agent's timed work, started and stopped with the server: firings a previous process left
//! open are finished at start; the schedule clock runs only in production serve with its own
//! clocks (not under `--dev`, `--no-schedules` or `--no-control-plane`), the reminder clock
//! likewise (not under `--dev` or `--no-control-plane`). The firing logic is the
//! engine's (`bdk_engine::schedules`); this module only decides whether its clock runs here.

use tokio::task::JoinHandle;

use crate::state::{Agent, AppState};

/// Starts every agent's timed work; returns the tasks to await after [`stop`].
pub(crate) fn start(state: &AppState) -> Vec<JoinHandle<()>> {
    let clocks = Agent::clocks_run(&state.options);
    let reminder_clock = Agent::reminder_clock_runs(&state.options);
    let mut tasks = Vec::new();
    for agent in state.agents.iter() {
        if let Some(reminders) = agent.reminders.clone() {
            let slug = agent.slug().to_owned();
            tasks.push(tokio::spawn(async move {
                match reminders.recover().await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(agent = %slug, firings = n, "closed reminder firings a stop interrupted"),
                    Err(error) => tracing::error!(agent = %slug, %error, "closing open reminder firings failed"),
                }
                if reminder_clock {
                    reminders.run().await;
                }
            }));
        }
        let Some(schedules) = agent.schedules.clone() else { continue };
        let slug = agent.slug().to_owned();
        tasks.push(tokio::spawn(async move {
            match schedules.recover().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(agent = %slug, firings = n, "picked up schedule firings left open"),
                Err(error) => tracing::error!(agent = %slug, %error, "picking up open schedule firings failed"),
            }
            if !clocks {
                return;
            }
            match schedules.fire_missed().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(agent = %slug, firings = n, "fired schedules missed while down"),
                Err(error) => tracing::error!(agent = %slug, %error, "firing missed schedules failed"),
            }
            schedules.run().await;
        }));
    }
    tasks
}

/// Stops the clocks (firings still open stay claimed for the next start) and waits for them.
pub(crate) async fn stop(state: &AppState, tasks: Vec<JoinHandle<()>>) {
    for agent in state.agents.iter() {
        if let Some(schedules) = &agent.schedules {
            schedules.shutdown();
        }
        if let Some(reminders) = &agent.reminders {
            reminders.shutdown();
        }
    }
    for task in tasks {
        let _ = task.await;
    }
}
