-- BDK schema version 4: `max_running_turns` for the whole host group sharing the database.

-- One row per turn that holds one of its agent's running-turn slots (running) or waits for one
-- (queued, in seq order). Claims take a per-agent advisory lock, count the running rows and
-- promote the first waiters while the count is under the limit. A row is live only while its
-- replica holds the session's lease: rows of a replica that died (lease expired or taken over)
-- are dropped by the next claim. Unlogged: a slot lives only as long as its turn, so its writes
-- need no WAL and no fsync (a database crash empties the table along with the turns it counted).
CREATE UNLOGGED TABLE bdk_turn_slots (
    seq        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent      text    NOT NULL,
    session_id text    NOT NULL,
    turn_id    text    NOT NULL,
    replica    text    NOT NULL,
    running    boolean NOT NULL DEFAULT false,
    UNIQUE (agent, session_id, turn_id)
);
CREATE INDEX bdk_turn_slots_by_agent ON bdk_turn_slots (agent, running, seq);
