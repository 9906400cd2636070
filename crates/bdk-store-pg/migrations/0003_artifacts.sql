-- BDK schema version 3: artifacts (records tagged by owner, kind and key, with optional content).

CREATE TABLE bdk_artifacts (
    agent      text        NOT NULL,
    id         text        NOT NULL,
    principal  text        NOT NULL,
    kind       text        NOT NULL,
    key        text        NOT NULL,
    session_id text,
    -- The record as JSON text (what GET /v1/artifacts lists).
    record     text        NOT NULL,
    -- Content up to bdk_store::artifacts::MAX_CONTENT_BYTES (16 MiB).
    content    bytea,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (agent, id),
    UNIQUE (agent, principal, kind, key)
);
CREATE INDEX bdk_artifacts_by_update ON bdk_artifacts (agent, updated_at DESC, id DESC);
