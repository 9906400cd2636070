-- BDK schema version 1: every durable thing of every agent, keyed by the agent's slug.

CREATE TABLE bdk_sessions (
    agent      text   NOT NULL,
    id         text   NOT NULL,
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    record     text   NOT NULL,
    -- The next event index: kept by the trigger below, never by clients.
    next_index bigint NOT NULL DEFAULT 0 CHECK (next_index >= 0),
    -- Bumped each time the session's workspace is saved (bdk_workspace_files).
    workspace_version bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (agent, id)
);
CREATE INDEX bdk_sessions_by_age ON bdk_sessions (agent, seq);

-- The append-only event logs. `body` is the event's NDJSON line, exactly as the stream sends it.
CREATE TABLE bdk_events (
    agent      text   NOT NULL,
    session_id text   NOT NULL,
    idx        bigint NOT NULL CHECK (idx >= 0),
    body       text   NOT NULL,
    PRIMARY KEY (agent, session_id, idx),
    FOREIGN KEY (agent, session_id) REFERENCES bdk_sessions (agent, id) ON DELETE CASCADE
);

-- Dense indices, enforced here: the rows one statement appends to a session must be exactly
-- next_index, next_index + 1, ... (the primary key rules out duplicates, this rules out gaps),
-- and the session's next_index moves past them. Followers on every replica are told at commit.
CREATE FUNCTION bdk_events_dense() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT agent, session_id, min(idx) AS lo, max(idx) AS hi, count(*) AS n
               FROM appended GROUP BY agent, session_id LOOP
        UPDATE bdk_sessions SET next_index = r.hi + 1
         WHERE agent = r.agent AND id = r.session_id AND next_index = r.lo AND r.hi - r.lo + 1 = r.n;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'events of session % must continue its log at its next index, without gaps', r.session_id
                USING ERRCODE = 'check_violation';
        END IF;
        PERFORM pg_notify('bdk_events', r.agent || ' ' || r.session_id || ' ' || (r.hi + 1));
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER bdk_events_dense AFTER INSERT ON bdk_events REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION bdk_events_dense();

-- Append-only: no event is changed, and none is removed except with its session.
CREATE FUNCTION bdk_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' OR pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'event logs are append-only' USING ERRCODE = 'check_violation';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER bdk_events_append_only BEFORE UPDATE OR DELETE ON bdk_events
    FOR EACH ROW EXECUTE FUNCTION bdk_events_append_only();

CREATE FUNCTION bdk_sessions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bdk_events', OLD.agent || ' ' || OLD.id || ' deleted');
    RETURN NULL;
END $$;
CREATE TRIGGER bdk_sessions_deleted AFTER DELETE ON bdk_sessions
    FOR EACH ROW EXECUTE FUNCTION bdk_sessions_deleted();

-- host.kv: scope '' is the agent-wide store, otherwise a session id.
CREATE TABLE bdk_kv (
    agent text NOT NULL,
    scope text NOT NULL,
    key   text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (agent, scope, key)
);

-- host.files, same scopes; content up to the documented limit (bdk-store-pg MAX_FILE_BYTES).
CREATE TABLE bdk_files (
    agent text  NOT NULL,
    scope text  NOT NULL,
    path  text  NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (agent, scope, path)
);

-- Timed work: one row per (kind, owner, due time); the primary key is the "fires once" rule.
CREATE TABLE bdk_firings (
    agent  text        NOT NULL,
    kind   text        NOT NULL,
    owner  text        NOT NULL,
    due_at timestamptz NOT NULL,
    status text        NOT NULL,
    record text        NOT NULL,
    PRIMARY KEY (agent, kind, owner, due_at)
);
CREATE INDEX bdk_firings_open ON bdk_firings (agent) WHERE status = 'claimed';

CREATE TABLE bdk_reminders (
    agent      text        NOT NULL,
    id         text        NOT NULL,
    created_at timestamptz NOT NULL,
    record     text        NOT NULL,
    PRIMARY KEY (agent, id)
);

-- Session workspaces, saved after each turn so a turn on another replica starts from them.
CREATE TABLE bdk_workspace_files (
    agent      text  NOT NULL,
    session_id text  NOT NULL,
    path       text  NOT NULL,
    mode       integer NOT NULL,
    bytes      bytea NOT NULL,
    PRIMARY KEY (agent, session_id, path),
    FOREIGN KEY (agent, session_id) REFERENCES bdk_sessions (agent, id) ON DELETE CASCADE
);
