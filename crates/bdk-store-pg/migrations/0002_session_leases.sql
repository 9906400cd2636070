-- BDK schema version 2: which replica runs each session, and commands forwarded to it.

-- One row per session some replica holds: the holder's heartbeat moves expires_at forward; a row
-- past expires_at belongs to a dead replica and may be claimed by any other. `token` names one
-- holding, so a late release of an earlier holding never drops a newer one.
CREATE TABLE bdk_session_leases (
    agent      text        NOT NULL,
    session_id text        NOT NULL,
    replica    text        NOT NULL,
    token      text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (agent, session_id)
);
CREATE INDEX bdk_session_leases_by_replica ON bdk_session_leases (replica);
CREATE INDEX bdk_session_leases_by_expiry ON bdk_session_leases (agent, expires_at);

-- A command for a session, sent by the replica that received it to the replica holding the
-- session's lease (NOTIFY bdk_commands wakes the target; NOTIFY bdk_replies wakes the sender).
-- The target claims a row once (taken), answers in reply; the sender deletes it. Unlogged: a
-- command lives only while its sender waits, so its writes need no WAL and no fsync (a database
-- crash empties the table; the senders' requests fail as unavailable, as they would anyway).
CREATE UNLOGGED TABLE bdk_session_commands (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent      text        NOT NULL,
    session_id text        NOT NULL,
    target     text        NOT NULL,
    sender     text        NOT NULL,
    body       text        NOT NULL,
    taken      boolean     NOT NULL DEFAULT false,
    reply      text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bdk_session_commands_pending ON bdk_session_commands (target, agent) WHERE NOT taken;
