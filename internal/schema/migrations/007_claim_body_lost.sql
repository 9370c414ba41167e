-- 006: a claim whose held body a failover lost is body_lost.
--
-- oml chain restore-tail re-inserts a lost tail from the lake's bronze, but a
-- held (unpromoted) body never reaches the lake, so a claim still held at the
-- end of the lost tail comes back without its body. Its chain.tail_restored
-- event names it (body_lost), and the fold moves it to this state: it can be
-- demoted, reassigned, erased or ended like a held claim, never promoted
-- (docs/schema.md, docs/runbooks/failover.md).
ALTER TABLE oml.claims DROP CONSTRAINT claims_state_check;
ALTER TABLE oml.claims ADD CONSTRAINT claims_state_check CHECK (state IN
    ('held', 'promoted', 'demoted', 'erased', 'simulation_ended', 'reassigned', 'body_lost'));

-- Restores journalled before this migration left the claims they name held;
-- the fold now says body_lost (at the restore's seq), so the stored state
-- follows it. A claim changed since (demoted, erased, ...) is not held and
-- keeps its state.
UPDATE oml.claims c
   SET state = 'body_lost', last_seq = j.seq, updated_at = j.recorded_at
  FROM oml.journal j
 CROSS JOIN LATERAL jsonb_array_elements(
           coalesce(convert_from(j.payload, 'UTF8')::jsonb -> 'body_lost', '[]'::jsonb)) AS b(ref)
 WHERE j.event_type = 'chain.tail_restored'
   AND c.tenant_id = j.tenant_id
   AND c.artifact_id = b.ref ->> 'artifact_id'
   AND c.version = (b.ref ->> 'version')::int
   AND c.state = 'held';
