-- BDK schema version 5: eval runs (the snapshots `bdk serve`'s eval routes list and poll).

-- One row per run of an agent's evals. `snapshot` is the run as GET /v1/dev/evals/runs/:id
-- returns it, rewritten after every attempt; status and started_at are copied out of it for the
-- listing and for recovery. A running run belongs to `replica`, whose heartbeat moves
-- expires_at forward with its session leases; a running row past expires_at was left by a
-- replica that died, and exactly one other replica claims it (one UPDATE) and marks it failed.
-- cancel_requested carries a cancel sent to another replica to the one running the run.
CREATE TABLE bdk_eval_runs (
    agent            text        NOT NULL,
    run_id           text        NOT NULL,
    status           text        NOT NULL,
    started_at       timestamptz NOT NULL,
    snapshot         jsonb       NOT NULL,
    replica          text        NOT NULL,
    expires_at       timestamptz NOT NULL,
    cancel_requested boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (agent, run_id)
);
CREATE INDEX bdk_eval_runs_by_start ON bdk_eval_runs (agent, started_at DESC, run_id DESC);
CREATE INDEX bdk_eval_runs_running ON bdk_eval_runs (replica) WHERE status = 'running';
