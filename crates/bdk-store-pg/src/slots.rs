//! `max_running_turns` across replicas: `bdk_turn_slots` holds one row per turn that runs
//! (`running`) or waits for a slot (in `seq` order), for every replica on the database.
//!
//! A claim is one transaction under a per-agent advisory lock: drop the rows whose replica no
//! longer holds the session's lease (it died, or its lease was taken over), add this turn's row
//! if it has none (its place in the queue), and mark it running when the running rows plus the
//! waiters ahead of it leave a slot free. Claiming again keeps the place, so a waiting turn asks
//! again until its turn comes. Releasing deletes the row. The lock serializes the claims of one
//! agent only; they are short (a handful of index reads and one write). Releasing a slot also
//! sends `NOTIFY bdk_slots` with the agent, which wakes the turns waiting on every replica. Advisory locks are
//! database-wide, so the key names the schema too: an agent of the same name deployed in another
//! schema of the database does not share its lock.

use bdk_protocol::SessionId;
use bdk_store::{Result, SlotClaim};

use crate::error::db;
use crate::notify::slots_key;
use crate::store::PgStore;

impl PgStore {
    pub(crate) async fn claim_turn_slot(&self, session: &SessionId, turn: &str, max: u32) -> Result<SlotClaim> {
        let mut client = self.db.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('bdk_turn_slots:' || current_schema()), hashtext($1))",
            &[&&*self.agent],
        )
        .await
        .map_err(db)?;
        tx.execute(
            "DELETE FROM bdk_turn_slots s WHERE s.agent = $1 AND NOT EXISTS (SELECT 1 FROM bdk_session_leases l \
             WHERE l.agent = s.agent AND l.session_id = s.session_id AND l.replica = s.replica \
             AND l.expires_at > now())",
            &[&&*self.agent],
        )
        .await
        .map_err(db)?;
        tx.execute(
            "INSERT INTO bdk_turn_slots (agent, session_id, turn_id, replica) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (agent, session_id, turn_id) DO NOTHING",
            &[&&*self.agent, &session.as_str(), &turn, &self.db.replica],
        )
        .await
        .map_err(db)?;
        // How many run, and this turn's place among the waiters (0 when it already runs).
        let row = tx
            .query_one(
                "SELECT (SELECT count(*) FROM bdk_turn_slots WHERE agent = $1 AND running), \
                 CASE WHEN m.running THEN 0 ELSE (SELECT count(*) FROM bdk_turn_slots w \
                 WHERE w.agent = $1 AND NOT w.running AND w.seq <= m.seq) END \
                 FROM bdk_turn_slots m WHERE m.agent = $1 AND m.session_id = $2 AND m.turn_id = $3",
                &[&&*self.agent, &session.as_str(), &turn],
            )
            .await
            .map_err(db)?;
        let (running, place): (i64, i64) = (row.get(0), row.get(1));
        let free = (i64::from(max) - running).max(0);
        let claim = if place == 0 {
            SlotClaim::Running
        } else if place <= free {
            tx.execute(
                "UPDATE bdk_turn_slots SET running = true WHERE agent = $1 AND session_id = $2 AND turn_id = $3",
                &[&&*self.agent, &session.as_str(), &turn],
            )
            .await
            .map_err(db)?;
            SlotClaim::Running
        } else {
            SlotClaim::Queued { position: u32::try_from(place - free).unwrap_or(u32::MAX) }
        };
        tx.commit().await.map_err(db)?;
        Ok(claim)
    }

    pub(crate) async fn release_turn_slot(&self, session: &SessionId, turn: &str) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                "WITH gone AS (DELETE FROM bdk_turn_slots WHERE agent = $1 AND session_id = $2 AND turn_id = $3 \
                 RETURNING agent) SELECT pg_notify('bdk_slots', agent) FROM gone",
                &[&&*self.agent, &session.as_str(), &turn],
            )
            .await
            .map_err(db)?;
        Ok(())
    }

    /// Resolves at the next `NOTIFY bdk_slots` for this agent (any replica released a slot).
    /// Subscribes now, not when first polled, so a release right after the call is not missed.
    pub(crate) fn turn_slot_released(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut signal = self.db.notifier.subscribe_key(slots_key(&self.agent));
        async move {
            let _ = signal.receiver.changed().await;
        }
    }

    /// Every lease of this replica for this agent, made claimable now: expired rather than
    /// deleted, so the other replicas' sweeps also pick up a session left running (a turn
    /// suspended while it waited for approvals), and marked released in `replica` so this
    /// replica's heartbeat, still running, does not renew it.
    pub(crate) async fn expire_own_leases(&self) -> Result<u64> {
        let client = self.db.client().await?;
        client
            .execute(
                "UPDATE bdk_session_leases SET expires_at = now() - interval '1 millisecond', \
                 replica = replica || ' (released)' WHERE agent = $1 AND replica = $2",
                &[&&*self.agent, &self.db.replica],
            )
            .await
            .map_err(db)
    }
}
