//! `max_running_turns` across replicas: `bdk_turn_slots` holds one row per turn that runs
//! (`running`) or waits for a slot (in `seq` order), for every replica on the database.
//!
//! A claim is one transaction under a per-agent advisory lock: drop the rows whose replica no
//! longer holds the session's lease (it died, or its lease was taken over), add this turn's row
//! if it has none (its place in the queue), and mark it running when the running rows plus the
//! waiters ahead of it leave a slot free. Claiming again keeps the place, so a waiting turn asks
//! again until its turn comes. Releasing deletes the row. The lock serializes the claims of one
//! agent only; they are short (a handful of index reads and one write), and a claim is one
//! statement (the function `bdk_claim_turn_slot` of migration 6). Releasing notifies
//! `bdk_slots` (the agent's slug): every replica's waiting turns ask again at once (they also
//! ask every few seconds, in case a notification is lost or a slot was freed by its holder's
//! death). Advisory locks are
//! database-wide, so the lock's key names the schema too: an agent of the same name deployed in
//! another schema of the database does not share its lock.

use bdk_protocol::SessionId;
use bdk_store::{Result, SlotClaim};

use crate::error::db;
use crate::notify::slots_key;
use crate::store::PgStore;

/// The claim: one statement, `bdk_claim_turn_slot` (migration 6), which takes the steps above in
/// its own transaction and answers how many run and this turn's place among the waiters.
const CLAIM: &str = "SELECT taken, waiting FROM bdk_claim_turn_slot($1, $2, $3, $4, $5)";

/// Gives a slot (or a place) up and tells every replica (`NOTIFY bdk_slots`, at commit).
const RELEASE: &str = "WITH d AS (DELETE FROM bdk_turn_slots WHERE agent = $1 AND session_id = $2 AND turn_id = $3 \
     RETURNING agent) SELECT pg_notify('bdk_slots', agent) FROM d";

impl PgStore {
    /// One round trip, one statement. The table is unlogged, so its commit waits for no flush.
    pub(crate) async fn claim_turn_slot(&self, session: &SessionId, turn: &str, max: u32) -> Result<SlotClaim> {
        let client = self.db.client().await?;
        let claim = client.prepare_cached(CLAIM).await.map_err(db)?;
        let (session, max) = (session.as_str(), i64::from(max));
        let row =
            client.query_one(&claim, &[&&*self.agent, &session, &turn, &self.db.replica, &max]).await.map_err(db)?;
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
                "UPDATE bdk_session_leases SET expires_at = now() - interval '1 millisecond', \
                 replica = replica || ' (released)' WHERE agent = $1 AND replica = $2",
                &[&&*self.agent, &self.db.replica],
            )
            .await
            .map_err(db)
    }
}
