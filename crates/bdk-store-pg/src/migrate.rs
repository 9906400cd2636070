//! The embedded migrations and the schema version check. Migrations run in one transaction under
//! an advisory lock, so replicas starting together apply them once; a database at a newer
//! version than this build knows is refused, never downgraded or guessed at.

use deadpool_postgres::Object;

use crate::error::{PgError, Result, db};

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[(&str, &str)] = &[
    ("initial", include_str!("../migrations/0001_initial.sql")),
    ("session_leases", include_str!("../migrations/0002_session_leases.sql")),
    ("artifacts", include_str!("../migrations/0003_artifacts.sql")),
    ("turn_slots", include_str!("../migrations/0004_turn_slots.sql")),
    ("eval_runs", include_str!("../migrations/0005_eval_runs.sql")),
];

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// What opening did to the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The version found before.
    pub from: i32,
    /// The version now.
    pub to: i32,
    /// Names of the migrations applied.
    pub applied: Vec<String>,
}

const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS bdk_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)";

async fn current(client: &impl deadpool_postgres::GenericClient) -> Result<i32> {
    let exists = client
        .query_one("SELECT to_regclass('bdk_schema_migrations') IS NOT NULL", &[])
        .await
        .map_err(|e| PgError::Store(db(e)))?;
    if !exists.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM bdk_schema_migrations", &[])
        .await
        .map_err(|e| PgError::Store(db(e)))?;
    Ok(row.get(0))
}

/// Applies every pending migration. Refuses a newer schema.
pub(crate) async fn apply(client: &mut Object) -> Result<MigrationReport> {
    let tx = client.transaction().await.map_err(|e| PgError::Store(db(e)))?;
    // One migrator per schema at a time; the others wait here and then find nothing to do.
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('bdk_migrate:' || current_schema()))", &[])
        .await
        .map_err(|e| PgError::Store(db(e)))?;
    tx.batch_execute(VERSION_TABLE).await.map_err(|e| PgError::Store(db(e)))?;
    let from = current(&tx).await?;
    if from > SCHEMA_VERSION {
        // Roll back now (not on drop, which only queues it): the connection is then clean.
        tx.rollback().await.map_err(|e| PgError::Store(db(e)))?;
        return Err(PgError::NewerSchema { found: from, supported: SCHEMA_VERSION });
    }
    let mut applied = Vec::new();
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        tx.batch_execute(sql).await.map_err(|e| PgError::Store(db(e)))?;
        let version = i as i32 + 1;
        tx.execute("INSERT INTO bdk_schema_migrations (version, name) VALUES ($1, $2)", &[&version, name])
            .await
            .map_err(|e| PgError::Store(db(e)))?;
        applied.push(format!("{version:04}_{name}"));
    }
    tx.commit().await.map_err(|e| PgError::Store(db(e)))?;
    Ok(MigrationReport { from, to: SCHEMA_VERSION, applied })
}

/// Checks that the schema is exactly this build's, applying nothing.
pub(crate) async fn check(client: &Object) -> Result<MigrationReport> {
    let found = current(client).await?;
    if found > SCHEMA_VERSION {
        return Err(PgError::NewerSchema { found, supported: SCHEMA_VERSION });
    }
    if found < SCHEMA_VERSION {
        return Err(PgError::NeedsMigration { found, supported: SCHEMA_VERSION });
    }
    Ok(MigrationReport { from: found, to: found, applied: Vec::new() })
}
