-- BDK schema version 6: a turn-slot claim is one statement.

-- The claim of `slots.rs` (version 4), as one function: under the agent's advisory lock, drop
-- the rows whose replica no longer holds the session's lease, add this turn's row if it has
-- none, mark it running when the waiters up to it fit in the free slots, and say how many run
-- and this turn's place among the waiters (0 when it runs). Called as a single statement, it
-- is its own transaction: the lock is held until it ends. One statement instead of seven
-- (`BEGIN`, five, `COMMIT`) on the path of every turn under `max_running_turns`.
CREATE FUNCTION bdk_claim_turn_slot(p_agent text, p_session text, p_turn text, p_replica text, p_max bigint,
                                    OUT taken bigint, OUT waiting bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('bdk_turn_slots:' || current_schema()), hashtext(p_agent));
    DELETE FROM bdk_turn_slots s WHERE s.agent = p_agent AND NOT EXISTS
        (SELECT 1 FROM bdk_session_leases l WHERE l.agent = s.agent AND l.session_id = s.session_id
         AND l.replica = s.replica AND l.expires_at > now());
    INSERT INTO bdk_turn_slots (agent, session_id, turn_id, replica) VALUES (p_agent, p_session, p_turn, p_replica)
        ON CONFLICT (agent, session_id, turn_id) DO NOTHING;
    UPDATE bdk_turn_slots m SET running = true
     WHERE m.agent = p_agent AND m.session_id = p_session AND m.turn_id = p_turn AND NOT m.running
       AND (SELECT count(*) FROM bdk_turn_slots w WHERE w.agent = p_agent AND NOT w.running AND w.seq <= m.seq)
           <= p_max - (SELECT count(*) FROM bdk_turn_slots r WHERE r.agent = p_agent AND r.running);
    SELECT (SELECT count(*) FROM bdk_turn_slots WHERE agent = p_agent AND running),
           CASE WHEN m.running THEN 0 ELSE (SELECT count(*) FROM bdk_turn_slots w
                WHERE w.agent = p_agent AND NOT w.running AND w.seq <= m.seq) END
      INTO taken, waiting
      FROM bdk_turn_slots m WHERE m.agent = p_agent AND m.session_id = p_session AND m.turn_id = p_turn;
END $$;
