//! [`KvStore`] and [`HostDataStore`] on PostgreSQL: `bdk_kv` and `bdk_files`, scope `''` for the
//! agent-wide area and the session id for a session's own. Keys and paths follow the same rules
//! as on disk (`bdk_store::rules`); a file "folder" is the set of paths under `<path>/`.

use bdk_store::rules::{check_file_path, check_kv_key};
use bdk_store::{BoxFuture, DataScope, Error, FileEntry, HostDataStore, KvStore, Result};
use serde_json::Value;

use crate::error::{corrupt, db, encode};
use crate::store::PgStore;

/// The largest `host.files` file kept in the database: 32 MiB. Larger writes fail with
/// `TooLarge` (PostgreSQL's own limit for one value is 1 GiB; this keeps rows and memory sane).
pub const MAX_FILE_BYTES: usize = 32 * 1024 * 1024;

fn scope_key(scope: &DataScope) -> &str {
    match scope {
        DataScope::Agent => "",
        DataScope::Session(id) => id.as_str(),
    }
}

/// `LIKE` pattern for "starts with `prefix`".
fn prefix_pattern(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// The statements that find their row by its whole key, prepared once per connection (the
/// others match a prefix with `LIKE` or `ANY`, whose generic plan could not use the pattern, so
/// they are planned for their arguments each time).
pub(crate) const SESSION_EXISTS: &str = "SELECT 1 FROM bdk_sessions WHERE agent = $1 AND id = $2";
const KV_GET: &str = "SELECT value FROM bdk_kv WHERE agent = $1 AND scope = $2 AND key = $3";
const KV_DELETE: &str = "DELETE FROM bdk_kv WHERE agent = $1 AND scope = $2 AND key = $3";
const FILE_READ: &str = "SELECT bytes FROM bdk_files WHERE agent = $1 AND scope = $2 AND path = $3";
const FILE_DELETE: &str = "DELETE FROM bdk_files WHERE agent = $1 AND scope = $2 AND path = $3";
const KV_PUT: &str = "INSERT INTO bdk_kv (agent, scope, key, value) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (agent, scope, key) DO UPDATE SET value = EXCLUDED.value";
const FILE_WRITE: &str = "INSERT INTO bdk_files (agent, scope, path, bytes) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (agent, scope, path) DO UPDATE SET bytes = EXCLUDED.bytes";

impl PgStore {
    async fn scope_writable(&self, client: &deadpool_postgres::Object, scope: &DataScope) -> Result<()> {
        if let DataScope::Session(id) = scope {
            let statement = client.prepare_cached(SESSION_EXISTS).await.map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &id.as_str()]).await.map_err(db)?;
            if row.is_none() {
                return Err(Error::SessionNotFound(id.clone()));
            }
        }
        Ok(())
    }
}

impl HostDataStore for PgStore {
    fn kv_get<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        Box::pin(async move {
            check_kv_key(key)?;
            let client = self.db.client().await?;
            let statement = client.prepare_cached(KV_GET).await.map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &scope_key(scope), &key]).await.map_err(db)?;
            row.map(|row| serde_json::from_str(row.get(0)).map_err(|e| corrupt("a kv value", e))).transpose()
        })
    }

    fn kv_put<'a>(&'a self, scope: &'a DataScope, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            check_kv_key(key)?;
            let text = serde_json::to_string(&value).map_err(encode)?;
            let client = self.db.client().await?;
            self.scope_writable(&client, scope).await?;
            let statement = client.prepare_cached(KV_PUT).await.map_err(db)?;
            client.execute(&statement, &[&&*self.agent, &scope_key(scope), &key, &text]).await.map_err(db)?;
            Ok(())
        })
    }

    fn kv_delete<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            check_kv_key(key)?;
            let client = self.db.client().await?;
            let statement = client.prepare_cached(KV_DELETE).await.map_err(db)?;
            let n = client.execute(&statement, &[&&*self.agent, &scope_key(scope), &key]).await.map_err(db)?;
            Ok(n > 0)
        })
    }

    fn kv_keys<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT key FROM bdk_kv WHERE agent = $1 AND scope = $2 AND key LIKE $3 ORDER BY key COLLATE \"C\"",
                    &[&&*self.agent, &scope_key(scope), &prefix_pattern(prefix)],
                )
                .await
                .map_err(db)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn file_read<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            check_file_path(path)?;
            let client = self.db.client().await?;
            let statement = client.prepare_cached(FILE_READ).await.map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &scope_key(scope), &path]).await.map_err(db)?;
            if let Some(row) = row {
                return Ok(Some(row.get(0)));
            }
            if self.is_folder(&client, scope, path).await? {
                return Err(Error::InvalidPath { path: path.to_owned(), reason: "is a folder" });
            }
            Ok(None)
        })
    }

    fn file_write<'a>(&'a self, scope: &'a DataScope, path: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            check_file_path(path)?;
            if bytes.len() > MAX_FILE_BYTES {
                return Err(Error::TooLarge {
                    what: "the file",
                    size: bytes.len() as u64,
                    limit: MAX_FILE_BYTES as u64,
                });
            }
            let client = self.db.client().await?;
            self.scope_writable(&client, scope).await?;
            if self.is_folder(&client, scope, path).await? {
                return Err(Error::InvalidPath { path: path.to_owned(), reason: "is a folder" });
            }
            // A parent that is a file: any stored path equal to a proper prefix of this one.
            let parents: Vec<String> = path.match_indices('/').map(|(i, _)| path[..i].to_owned()).collect();
            if !parents.is_empty() {
                let row = client
                    .query_opt(
                        "SELECT 1 FROM bdk_files WHERE agent = $1 AND scope = $2 AND path = ANY($3)",
                        &[&&*self.agent, &scope_key(scope), &parents],
                    )
                    .await
                    .map_err(db)?;
                if row.is_some() {
                    return Err(Error::InvalidPath { path: path.to_owned(), reason: "a parent is a file" });
                }
            }
            let statement = client.prepare_cached(FILE_WRITE).await.map_err(db)?;
            client.execute(&statement, &[&&*self.agent, &scope_key(scope), &path, &bytes]).await.map_err(db)?;
            Ok(())
        })
    }

    fn file_delete<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            check_file_path(path)?;
            let client = self.db.client().await?;
            let statement = client.prepare_cached(FILE_DELETE).await.map_err(db)?;
            let n = client.execute(&statement, &[&&*self.agent, &scope_key(scope), &path]).await.map_err(db)?;
            if n == 0 && self.is_folder(&client, scope, path).await? {
                return Err(Error::InvalidPath { path: path.to_owned(), reason: "is a folder" });
            }
            Ok(n > 0)
        })
    }

    fn file_list<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<FileEntry>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT path, octet_length(bytes)::bigint FROM bdk_files \
                     WHERE agent = $1 AND scope = $2 AND path LIKE $3 ORDER BY path COLLATE \"C\"",
                    &[&&*self.agent, &scope_key(scope), &prefix_pattern(prefix)],
                )
                .await
                .map_err(db)?;
            Ok(rows.iter().map(|r| FileEntry { path: r.get(0), size: r.get::<_, i64>(1) as u64 }).collect())
        })
    }
}

impl PgStore {
    async fn is_folder(&self, client: &deadpool_postgres::Object, scope: &DataScope, path: &str) -> Result<bool> {
        let row = client
            .query_opt(
                "SELECT 1 FROM bdk_files WHERE agent = $1 AND scope = $2 AND path LIKE $3 LIMIT 1",
                &[&&*self.agent, &scope_key(scope), &prefix_pattern(&format!("{path}/"))],
            )
            .await
            .map_err(db)?;
        Ok(row.is_some())
    }
}

/// The agent-wide scope, for the [`KvStore`] methods (which borrow it for the future's life).
static AGENT: DataScope = DataScope::Agent;

impl KvStore for PgStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        self.kv_get(&AGENT, key)
    }

    fn put<'a>(&'a self, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>> {
        self.kv_put(&AGENT, key, value)
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool>> {
        self.kv_delete(&AGENT, key)
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        self.kv_keys(&AGENT, prefix)
    }
}

#[cfg(test)]
mod tests {
    /// The statements prepared once per connection keep their first plan: on a fresh schema's
    /// empty tables it must still find the row by its key.
    #[tokio::test]
    async fn a_prepared_lookup_finds_its_row_by_key() {
        let key = "'bot', 'agent', 'k'";
        let statements = [
            (super::SESSION_EXISTS, "'bot', 's'"),
            (super::KV_GET, key),
            (super::KV_DELETE, key),
            (super::FILE_READ, key),
            (super::FILE_DELETE, key),
        ];
        let Some(plans) = crate::db::generic_plans(&statements).await else { return };
        for plan in plans {
            assert!(plan.contains("_pkey") && !plan.contains("Seq Scan"), "{plan}");
        }
    }
}
