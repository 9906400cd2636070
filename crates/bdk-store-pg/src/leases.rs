//! [`SessionLeases`] on PostgreSQL: `bdk_session_leases` says which replica runs each session,
//! `bdk_session_commands` carries commands to it.
//!
//! - A lease is claimed with one upsert that only overwrites a row that is this replica's or
//!   past its `expires_at`, so two replicas racing for a session get one winner from the
//!   database, not from a timer. The heartbeat renews every lease of this replica (one `UPDATE`,
//!   committed without waiting for the WAL flush) every third of the lease period; a replica
//!   that stops (SIGKILL, lost network) stops renewing, and its leases are free to claim one
//!   period later.
//! - A forwarded command is a row (its body as JSON text) plus `NOTIFY bdk_commands`; the target's
//!   inbox claims its pending rows once (`taken`), hands them to the engine, writes each answer
//!   into `reply` and sends `NOTIFY bdk_replies`. Notifications only wake: the inbox also looks
//!   every [`INBOX_POLL`], the sender every [`REPLY_POLL`], so a lost notification costs latency.
//!
//! It knows nothing of what a command means (the engine encodes and answers them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bdk_protocol::{SessionId, TurnId};
use bdk_store::{BoxFuture, Claim, Error, Incoming, Result, SessionLeases, SlotClaim};
use deadpool_postgres::Pool;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::db::PgDatabase;
use crate::error::{db, encode};
use crate::notify::{inbox_key, reply_key};
use crate::store::PgStore;

/// How often an inbox looks for commands without being notified.
const INBOX_POLL: Duration = Duration::from_secs(1);

/// How often a sender looks for its answer without being notified.
const REPLY_POLL: Duration = Duration::from_millis(250);

/// A command for the replica holding a session's lease, and the notification that wakes it.
const SEND: &str = "WITH c AS (INSERT INTO bdk_session_commands (agent, session_id, target, sender, body) \
     VALUES ($1, $2, $3, $4, $5) RETURNING id) \
     SELECT id, pg_notify('bdk_commands', $3 || ' ' || $1 || ' ' || id) FROM c";

/// How long a sender waits for its answer's notification before it first looks.
const FIRST_LOOK: Duration = Duration::from_millis(20);

/// A sender's look: takes the answer (deleting the row) once there is one; otherwise whether
/// the target took the command, and whether it still holds a live lease on the session. (The
/// outer query reads the row as it was before the delete.)
const REPLY: &str = "WITH answered AS (DELETE FROM bdk_session_commands WHERE id = $1 AND reply IS NOT NULL \
     RETURNING reply) \
     SELECT (SELECT reply FROM answered), c.taken, EXISTS (SELECT 1 FROM bdk_session_leases l \
     WHERE l.agent = c.agent AND l.session_id = c.session_id AND l.replica = c.target \
     AND l.expires_at > now()) FROM bdk_session_commands c WHERE c.id = $1";

/// Commands an inbox holds before it stops claiming more.
const INBOX_DEPTH: usize = 256;

/// A fresh replica id: the process id and a random suffix (unique across restarts and hosts).
pub(crate) fn replica_id() -> String {
    let random = TurnId::generate();
    let suffix = random.as_str().rsplit('_').next().unwrap_or(random.as_str()).to_owned();
    format!("r{}-{suffix}", std::process::id())
}

/// Renews every lease this replica holds (sessions, and the eval runs it runs), every third of
/// `period`, until the database handle is dropped. A failed renewal is logged; the next one
/// tries again.
pub(crate) async fn heartbeat(pool: Pool, replica: String, period: Duration) {
    let millis = period.as_millis() as f64;
    let mut tick = tokio::time::interval(period / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let renewed = async {
            let client = pool.get().await.map_err(crate::error::pool)?;
            renew(&client, &replica, millis).await
        }
        .await;
        if let Err(error) = renewed {
            tracing::warn!(%error, "could not renew this replica's session leases");
        }
    }
}

/// Locks this replica's session leases in key order, as an append batch's fence locks the
/// leases it checks (`writer.rs`): locked in the table's order, a renewal and a batch fencing two
/// of its sessions could each hold the lease the other waits for, and the database broke the
/// deadlock by failing the batch.
const RENEW: &str = "WITH mine AS (SELECT agent, session_id FROM bdk_session_leases WHERE replica = $1 \
     ORDER BY agent, session_id FOR UPDATE) \
     UPDATE bdk_session_leases l SET expires_at = now() + $2::float8 * interval '1 millisecond' \
     FROM mine WHERE l.agent = mine.agent AND l.session_id = mine.session_id";

/// Renews every lease `replica` holds for `millis` from now: its sessions', and the eval runs it
/// runs.
async fn renew(client: &deadpool_postgres::Object, replica: &str, millis: f64) -> Result<u64> {
    // Not waited for: a renewal a database crash loses only makes the lease expire sooner
    // (another replica may then take the session over, and this one's appends to it are
    // refused by the fence): never two writers.
    let renewed = crate::db::relaxed(client, RENEW, &[&replica, &millis]).await?;
    // The eval runs this replica runs live as long as its sessions' leases do.
    crate::db::relaxed(
        client,
        "UPDATE bdk_eval_runs SET expires_at = now() + $2::float8 * interval '1 millisecond' \
         WHERE replica = $1 AND status = 'running'",
        &[&replica, &millis],
    )
    .await?;
    Ok(renewed)
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

impl PgStore {
    /// This agent's session leases (the engine's coordination with other replicas).
    pub fn leases(&self) -> Arc<dyn SessionLeases> {
        Arc::new(self.clone())
    }

    fn lease_millis(&self) -> f64 {
        self.db.session_lease.as_millis() as f64
    }
}

impl SessionLeases for PgStore {
    fn replica(&self) -> &str {
        &self.db.replica
    }

    fn period(&self) -> Duration {
        self.db.session_lease
    }

    fn acquire<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<Claim>> {
        Box::pin(async move {
            let token = format!("{}:{}", self.db.replica, NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
            let client = self.db.client().await?;
            // Two rounds: a lease released between the upsert and the read is claimed again.
            for _ in 0..2 {
                // Not waited for: appends are fenced on the token, so a claim a database crash
                // loses can only cost this replica its writes, never let two replicas write.
                let claimed = crate::db::execute_relaxed(
                    &self.db,
                    &client,
                    "INSERT INTO bdk_session_leases AS l (agent, session_id, replica, token, expires_at) \
                     VALUES ($1, $2, $3, $4, now() + $5::float8 * interval '1 millisecond') \
                     ON CONFLICT (agent, session_id) DO UPDATE \
                     SET replica = EXCLUDED.replica, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at \
                     WHERE l.replica = EXCLUDED.replica OR l.expires_at < now()",
                    &[&&*self.agent, &session.as_str(), &self.db.replica, &token, &self.lease_millis()],
                )
                .await?;
                if claimed == 1 {
                    self.db.hold(&self.agent, session.as_str(), &token);
                    return Ok(Claim::Held { token });
                }
                let holder = client
                    .prepare_cached("SELECT replica FROM bdk_session_leases WHERE agent = $1 AND session_id = $2")
                    .await
                    .map_err(db)?;
                let holder = client.query_opt(&holder, &[&&*self.agent, &session.as_str()]).await.map_err(db)?;
                if let Some(row) = holder {
                    return Ok(Claim::Elsewhere { replica: row.get(0) });
                }
            }
            Err(Error::Unavailable(format!("the lease of session {session} keeps changing hands; retry")))
        })
    }

    fn release<'a>(&'a self, session: &'a SessionId, token: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.db.let_go(&self.agent, session.as_str(), token);
            let client = self.db.client().await?;
            // Not waited for: a release a crash loses expires by itself.
            crate::db::execute_relaxed(
                &self.db,
                &client,
                "DELETE FROM bdk_session_leases WHERE agent = $1 AND session_id = $2 AND token = $3",
                &[&&*self.agent, &session.as_str(), &token],
            )
            .await?;
            Ok(())
        })
    }

    fn holder<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let statement = client
                .prepare_cached(
                    "SELECT replica FROM bdk_session_leases WHERE agent = $1 AND session_id = $2 \
                     AND expires_at > now()",
                )
                .await
                .map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &session.as_str()]).await.map_err(db)?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn expired(&self) -> BoxFuture<'_, Result<Vec<SessionId>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT session_id FROM bdk_session_leases WHERE agent = $1 AND expires_at < now() \
                     ORDER BY expires_at LIMIT 1000",
                    &[&&*self.agent],
                )
                .await
                .map_err(db)?;
            Ok(rows.iter().filter_map(|row| SessionId::parse(row.get::<_, String>(0)).ok()).collect())
        })
    }

    fn forward<'a>(
        &'a self,
        replica: &'a str,
        session: &'a SessionId,
        body: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let text = serde_json::to_string(&body).map_err(encode)?;
            let id: i64 = {
                let client = self.db.client().await?;
                let send = client.prepare_cached(SEND).await.map_err(db)?;
                let row = client
                    .query_one(&send, &[&&*self.agent, &session.as_str(), &replica, &self.db.replica, &text])
                    .await
                    .map_err(db)?;
                row.get(0)
            };
            let mut signal = self.db.notifier.subscribe_key(reply_key(id));
            let waited = tokio::time::timeout(timeout, async {
                // The answer takes the target at least a round trip, so the first look waits for
                // its notification (briefly: a dead target is found at this look).
                let mut wait = FIRST_LOOK;
                loop {
                    let _ = tokio::time::timeout(wait, signal.receiver.changed()).await;
                    wait = REPLY_POLL;
                    signal.receiver.borrow_and_update();
                    let client = self.db.client().await?;
                    let look = client.prepare_cached(REPLY).await.map_err(db)?;
                    let row = client.query_opt(&look, &[&id]).await.map_err(db)?;
                    let Some(row) = row else {
                        return Err(Error::Unavailable(format!("command {id} for session {session} vanished")));
                    };
                    if let Some(reply) = row.get::<_, Option<String>>(0) {
                        return Ok::<_, Error>(reply);
                    }
                    if !row.get::<_, bool>(1) && !row.get::<_, bool>(2) {
                        // The target died (or let go) before taking it: the lease is free to claim.
                        return Err(Error::Unavailable(format!(
                            "replica {replica} no longer holds session {session}; retry"
                        )));
                    }
                }
            })
            .await;
            // An answered row went with its answer; an unanswered one is withdrawn.
            if !matches!(waited, Ok(Ok(_)))
                && let Ok(client) = self.db.client().await
            {
                let _ = client.execute("DELETE FROM bdk_session_commands WHERE id = $1", &[&id]).await;
            }
            match waited {
                Ok(Ok(reply)) => serde_json::from_str(&reply)
                    .map_err(|e| Error::Backend(format!("a forwarded command's answer is not JSON: {e}"))),
                Ok(Err(error)) => Err(error),
                Err(_) => Err(Error::Unavailable(format!(
                    "replica {replica}, which runs session {session}, did not answer within {} s",
                    timeout.as_secs()
                ))),
            }
        })
    }

    fn claim_slot<'a>(&'a self, session: &'a SessionId, turn: &'a str, max: u32) -> BoxFuture<'a, Result<SlotClaim>> {
        Box::pin(self.claim_turn_slot(session, turn, max))
    }

    fn release_slot<'a>(&'a self, session: &'a SessionId, turn: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.release_turn_slot(session, turn))
    }

    /// `NOTIFY bdk_slots` from any replica (and a local release at once).
    fn slot_released(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.db.notifier.watch_key(crate::notify::slots_key(&self.agent)))
    }

    fn release_all(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.expire_own_leases())
    }

    fn serve(&self) -> Option<mpsc::Receiver<Incoming>> {
        let first =
            self.db.inboxes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(self.agent.to_string());
        if !first {
            return None;
        }
        let (tx, rx) = mpsc::channel(INBOX_DEPTH);
        tokio::spawn(inbox(Arc::downgrade(&self.db), self.agent.to_string(), tx));
        Some(rx)
    }
}

/// Claims the commands sent to this replica for `agent` and hands them to the engine until the
/// engine drops its receiver or the database handle goes away.
async fn inbox(db: std::sync::Weak<PgDatabase>, agent: String, tx: mpsc::Sender<Incoming>) {
    let mut signal = match db.upgrade() {
        Some(db) => db.notifier.subscribe_key(inbox_key(&db.replica, &agent)),
        None => return,
    };
    loop {
        signal.receiver.borrow_and_update();
        let Some(database) = db.upgrade() else { return };
        match claim(&database, &agent).await {
            Ok(commands) => {
                for (id, session, body) in commands {
                    let (reply, answer) = oneshot::channel();
                    if tx.send(Incoming { session, body, reply }).await.is_err() {
                        return;
                    }
                    tokio::spawn(answer_when_done(db.clone(), id, answer));
                }
            }
            Err(error) => tracing::warn!(%error, "could not read forwarded session commands"),
        }
        drop(database);
        if tx.is_closed() {
            return;
        }
        let _ = tokio::time::timeout(INBOX_POLL, signal.receiver.changed()).await;
    }
}

/// Marks this replica's pending commands for `agent` taken and returns them (each once).
async fn claim(db: &PgDatabase, agent: &str) -> Result<Vec<(i64, SessionId, Value)>> {
    let client = db.client().await?;
    let take = client
        .prepare_cached(
            "UPDATE bdk_session_commands SET taken = true WHERE target = $1 AND agent = $2 AND NOT taken \
             RETURNING id, session_id, body",
        )
        .await
        .map_err(db_error)?;
    let rows = client.query(&take, &[&db.replica, &agent]).await.map_err(db_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let id: i64 = row.get(0);
        let (Ok(session), Ok(body)) =
            (SessionId::parse(row.get::<_, String>(1)), serde_json::from_str::<Value>(row.get(2)))
        else {
            tracing::warn!(id, "ignoring a malformed forwarded command");
            continue;
        };
        out.push((id, session, body));
    }
    Ok(out)
}

fn db_error(error: tokio_postgres::Error) -> Error {
    db(error)
}

/// Writes the engine's answer to command `id` and wakes its sender.
async fn answer_when_done(db: std::sync::Weak<PgDatabase>, id: i64, answer: oneshot::Receiver<Value>) {
    let Ok(value) = answer.await else { return };
    let Some(db) = db.upgrade() else { return };
    let written = async {
        let text = serde_json::to_string(&value).map_err(encode)?;
        let client = db.client().await?;
        let answer = client
            .prepare_cached(
                "WITH r AS (UPDATE bdk_session_commands SET reply = $2 WHERE id = $1 RETURNING id) \
                 SELECT pg_notify('bdk_replies', id::text) FROM r",
            )
            .await
            .map_err(db_error)?;
        client.execute(&answer, &[&id, &text]).await.map_err(db_error)?;
        Ok::<_, Error>(())
    }
    .await;
    if let Err(error) = written {
        tracing::warn!(id, %error, "could not answer a forwarded session command");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::db::{PgDatabase, PgOptions};

    /// A sender's look reads its command by id and the target's lease by key, never a whole
    /// table, on empty tables too.
    #[tokio::test]
    async fn a_senders_look_reads_by_key() {
        let Some(plans) = crate::db::generic_plans(&[(super::REPLY, "1")]).await else { return };
        let plan = &plans[0];
        assert!(!plan.contains("Seq Scan") && !plan.contains("Hash"), "{plan}");
        assert!(plan.contains("bdk_session_leases_pkey"), "{plan}");
    }

    /// A renewal and an append batch fencing two sessions of the replica lock the same two
    /// leases; each must lock them in key order, or each can hold the lease the other waits for.
    /// Here the leases lie in the table against key order (`b` before `a`), the batch's side
    /// holds `a` (`FOR SHARE`, as the fence does), the renewal starts and waits, then the batch
    /// locks `b`. Locked in the table's order, the renewal held `b` by then: deadlock, and the
    /// database failed one of the two.
    #[tokio::test]
    async fn a_renewal_and_an_append_fence_lock_leases_in_one_order() {
        let Some(db) = bdk_test_support::postgres::fresh("lease_order").await else { return };
        let options = PgOptions { schema: Some(db.schema().to_owned()), ..PgOptions::default() };
        let database = PgDatabase::connect(db.base_url(), &options).await.unwrap();
        db.execute(
            "INSERT INTO bdk_session_leases (agent, session_id, replica, token, expires_at) VALUES \
             ('bot', 'b', 'r1', 't-b', now() + interval '1 minute'), \
             ('bot', 'a', 'r1', 't-a', now() + interval '1 minute')",
        )
        .await;
        let fence = database.client().await.unwrap();
        let lock = |session: &'static str| {
            format!(
                "SELECT 1 FROM bdk_session_leases WHERE agent = 'bot' AND session_id = '{session}' \
                 ORDER BY agent, session_id FOR SHARE"
            )
        };
        fence.batch_execute("BEGIN").await.unwrap();
        fence.batch_execute(&lock("a")).await.unwrap();

        let renewing = {
            let database = database.clone();
            tokio::spawn(async move {
                let client = database.client().await.unwrap();
                super::renew(&client, "r1", 600_000.0).await
            })
        };
        // Until the renewal waits for the lease the fence holds.
        let watcher = database.client().await.unwrap();
        let waits = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%bdk_session_leases%' AND pid <> pg_backend_pid()";
        for _ in 0..500 {
            if watcher.query_one(waits, &[]).await.unwrap().get::<_, i64>(0) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = fence.batch_execute(&lock("b")).await;
        let committed = fence.batch_execute("COMMIT").await;
        assert!(second.is_ok() && committed.is_ok(), "the fence failed: {second:?} {committed:?}");
        let renewed = tokio::time::timeout(Duration::from_secs(10), renewing).await.unwrap().unwrap();
        assert_eq!(renewed.unwrap(), 2, "both leases renewed");
        let left = watcher
            .query_one(
                "SELECT min(expires_at - now()) > interval '5 minutes' FROM bdk_session_leases WHERE replica = 'r1'",
                &[],
            )
            .await
            .unwrap();
        assert!(left.get::<_, bool>(0));
    }
}
