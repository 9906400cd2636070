//! `max_running_turns` across replicas: `bdk_turn_slots` holds one row per turn that runs
//! (`running`) or waits for a slot (in `seq` order), for every replica on the database.
//!
//! A claim is one transaction under a per-agent advisory lock. In the common case, when the
//! agent's rows (running, waiting and dead ones alike) leave a slot free, it adds this turn's
//! row already running and is done: one statement. Otherwise it claims in full, in a second
//! transaction: drop the rows whose replica no longer holds the session's lease (it died, or its
//! lease was taken over), add this turn's row if it has none (its place in the queue), and mark
//! it running when the running rows plus the waiters ahead of it leave a slot free. Claiming
//! again keeps the place, so a waiting turn asks again until its turn comes. Releasing deletes
//! the row. The lock serializes the claims of one agent only; they are short (a handful of
//! index reads and one write), and each transaction is one round trip (its statements
//! pipelined).
//!
//! The short claim counts dead rows as taken, so it never admits more than the full one would;
//! it leaves dropping them to the first claim that finds the slots full. Nor does it pass a
//! waiter: with the new row, the rows still number at most the limit, so every waiter fits
//! beside the running ones and runs at its next ask. It also writes each row once: a row made
//! waiting and then updated to running is two dead versions once released, and this table is
//! written on every turn. Releasing notifies `bdk_slots` (the agent's slug):
//! every replica's waiting turns ask again at once (they also ask every few seconds, in case a
//! notification is lost or a slot was freed by its holder's death). Advisory locks are
//! database-wide, so the lock's key names the schema too: an agent of the same name deployed in
//! another schema of the database does not share its lock.

use bdk_protocol::SessionId;
use bdk_store::{Result, SlotClaim};

use crate::db::Params;
use crate::error::db;
use crate::notify::slots_key;
use crate::store::PgStore;

/// The statements of a claim, in order, each prepared once per connection.
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('bdk_turn_slots:' || current_schema()), hashtext($1))";

/// Each row's lease is looked up by its key; its expiry is compared in an expression no index
/// serves, or the planner, with few leases in its statistics, looked it up in the expiry index
/// and read every live lease of the agent for every row.
const DROP_DEAD: &str = "DELETE FROM bdk_turn_slots s WHERE s.agent = $1 AND NOT EXISTS \
     (SELECT 1 FROM bdk_session_leases l WHERE l.agent = s.agent AND l.session_id = s.session_id \
     AND l.replica = s.replica AND l.expires_at - now() > interval '0' OFFSET 0)";

/// The short claim: this turn's row, running, when the agent's rows leave a slot free.
const RUN_NOW: &str = "INSERT INTO bdk_turn_slots (agent, session_id, turn_id, replica, running) \
     SELECT $1, $2, $3, $4, true WHERE (SELECT count(*) FROM bdk_turn_slots WHERE agent = $1) < $5::int8 \
     ON CONFLICT (agent, session_id, turn_id) DO NOTHING";

const JOIN: &str = "INSERT INTO bdk_turn_slots (agent, session_id, turn_id, replica) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (agent, session_id, turn_id) DO NOTHING";

/// Marks the turn running when the waiters up to it (itself included) fit in the free slots.
const RUN: &str = "UPDATE bdk_turn_slots m SET running = true \
     WHERE m.agent = $1 AND m.session_id = $2 AND m.turn_id = $3 AND NOT m.running \
     AND (SELECT count(*) FROM bdk_turn_slots w WHERE w.agent = $1 AND NOT w.running AND w.seq <= m.seq) \
     <= $4::int8 - (SELECT count(*) FROM bdk_turn_slots r WHERE r.agent = $1 AND r.running)";

/// How many run, and this turn's place among the waiters (0 when it runs).
const PLACE: &str = "SELECT (SELECT count(*) FROM bdk_turn_slots WHERE agent = $1 AND running), \
     CASE WHEN m.running THEN 0 ELSE (SELECT count(*) FROM bdk_turn_slots w \
     WHERE w.agent = $1 AND NOT w.running AND w.seq <= m.seq) END \
     FROM bdk_turn_slots m WHERE m.agent = $1 AND m.session_id = $2 AND m.turn_id = $3";

/// Gives a slot (or a place) up and tells every replica (`NOTIFY bdk_slots`, at commit).
const RELEASE: &str = "WITH d AS (DELETE FROM bdk_turn_slots WHERE agent = $1 AND session_id = $2 AND turn_id = $3 \
     RETURNING agent) SELECT pg_notify('bdk_slots', agent) FROM d";

impl PgStore {
    /// The short claim, and the full one when it does not run the turn: one round trip each
    /// (the statements of a transaction go out pipelined, then `COMMIT`). The table is unlogged,
    /// so a commit waits for no flush.
    pub(crate) async fn claim_turn_slot(&self, session: &SessionId, turn: &str, max: u32) -> Result<SlotClaim> {
        let client = self.db.client().await?;
        let (agent, session, max) = (&*self.agent, session.as_str(), i64::from(max));
        let run_now = client.prepare_cached(RUN_NOW).await.map_err(db)?;
        let added =
            locked(&client, agent, client.execute(&run_now, &[&agent, &session, &turn, &self.db.replica, &max]))
                .await?;
        if added == 1 {
            return Ok(SlotClaim::Running);
        }
        let (drop_dead, join, run, place) = tokio::try_join!(
            client.prepare_cached(DROP_DEAD),
            client.prepare_cached(JOIN),
            client.prepare_cached(RUN),
            client.prepare_cached(PLACE),
        )
        .map_err(db)?;
        let by_agent: &Params = &[&agent];
        let by_turn: &Params = &[&agent, &session, &turn];
        let joining: &Params = &[&agent, &session, &turn, &self.db.replica];
        let running: &Params = &[&agent, &session, &turn, &max];
        let claimed = async {
            // (`biased`: polled in order, so the statements go out in this order on the connection.)
            let (dropped, joined, ran, row) = tokio::join!(
                biased;
                client.execute(&drop_dead, by_agent),
                client.execute(&join, joining),
                client.execute(&run, running),
                client.query_one(&place, by_turn),
            );
            dropped?;
            joined?;
            ran?;
            row
        };
        let row = locked(&client, agent, claimed).await?;
        let (taken, place): (i64, i64) = (row.get(0), row.get(1));
        let free = (max - taken).max(0);
        Ok(match place {
            0 => SlotClaim::Running,
            place => SlotClaim::Queued { position: u32::try_from(place - free).unwrap_or(u32::MAX) },
        })
    }

    pub(crate) async fn release_turn_slot(&self, session: &SessionId, turn: &str) -> Result<()> {
        let client = self.db.client().await?;
        let statement = client.prepare_cached(RELEASE).await.map_err(db)?;
        client.query(&statement, &[&&*self.agent, &session.as_str(), &turn]).await.map_err(db)?;
        drop(client);
        // This replica's waiters need not wait for the notification to come back.
        self.db.notifier.bump_key(&slots_key(&self.agent));
        Ok(())
    }

    /// Every lease of this replica for this agent, made claimable now: expired rather than
    /// deleted, so the other replicas' sweeps also pick up a session left running (a turn
    /// suspended while it waited for approvals), and marked released in `replica` so this
    /// replica's heartbeat, still running, does not renew it.
    pub(crate) async fn expire_own_leases(&self) -> Result<u64> {
        let client = self.db.client().await?;
        client
            .execute(
                // In key order, as renewals and append fences lock leases (`leases.rs`).
                "WITH mine AS (SELECT agent, session_id FROM bdk_session_leases WHERE agent = $1 AND replica = $2 \
                 ORDER BY agent, session_id FOR UPDATE) \
                 UPDATE bdk_session_leases l SET expires_at = now() - interval '1 millisecond', \
                 replica = l.replica || ' (released)' FROM mine \
                 WHERE l.agent = mine.agent AND l.session_id = mine.session_id",
                &[&&*self.agent, &self.db.replica],
            )
            .await
            .map_err(db)
    }
}

/// Runs `statements` in one transaction under the agent's claim lock, pipelined with its
/// `BEGIN` and `COMMIT`: one round trip. A failed statement makes the rest fail and the commit a
/// rollback.
async fn locked<T>(
    client: &deadpool_postgres::Object,
    agent: &str,
    statements: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> Result<T> {
    let lock = client.prepare_cached(LOCK).await.map_err(db)?;
    let by_agent: &Params = &[&agent];
    // (`biased`: polled in order, so the statements go out in this order on the connection.)
    let (begun, locked, done, committed) = tokio::join!(
        biased;
        client.batch_execute(crate::db::BEGIN_KEYED),
        client.execute(&lock, by_agent),
        statements,
        client.batch_execute("COMMIT"),
    );
    begun.map_err(db)?;
    locked.map_err(db)?;
    let done = done.map_err(db)?;
    committed.map_err(db)?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    /// A claim drops dead rows looking each one's lease up by key, and the short claim counts
    /// by key, even on empty tables.
    #[tokio::test]
    async fn a_claim_looks_each_slots_lease_up_by_key() {
        let statements = [(super::DROP_DEAD, "'bot'"), (super::RUN_NOW, "'bot', 'ses_1', 'turn_1', 'r1', 16")];
        let Some(plans) = crate::db::keyed_plans(&statements).await else { return };
        assert!(plans[0].contains("bdk_session_leases_pkey"), "{}", plans[0]);
        assert!(!plans[0].contains("Seq Scan") && !plans[0].contains("expires_at_idx"), "{}", plans[0]);
        // The short claim counts the agent's rows in its index.
        assert!(plans[1].contains("bdk_turn_slots_by_agent") && !plans[1].contains("Seq Scan"), "{}", plans[1]);
    }
}
