-- mailbox.apply_reference_effect(p_source text, p_msg_id bigint, p_lease_token uuid, p_identity text,
--   p_key text, p_type text) RETURNS TABLE (outcome text, revision bigint)
-- (public, SPEC R-MX-9, R-MX-10; the reference handler's business effect)
-- Purpose: the business write of the reference handler, inside the handler's transaction: one
--   effective record per business identity (R-MX-9): a new identity -> (applied, the key's next
--   revision); an identity already bound -> (duplicate, its revision), nothing changed.
-- Fencing: only the live lease of the head may write (else OB001/OB402).
-- Locking: the head row FOR UPDATE; the key's sequence row (INSERT ... ON CONFLICT DO UPDATE).
-- SQLSTATEs: 22023 identity (1..200), key (1..200 characters) or type (a literal) invalid;
--   OB001; OB402; OB403.
-- Design notes: docs/mailbox.md#mailboxapply_reference_effect
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.apply_reference_effect(p_source text, p_msg_id bigint, p_lease_token uuid, p_identity text, p_key text, p_type text)
 RETURNS TABLE(outcome text, revision bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_rev bigint;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_identity IS NULL OR pg_catalog.length(p_identity) NOT BETWEEN 1 AND 200
       OR p_key IS NULL OR pg_catalog.length(p_key) NOT BETWEEN 1 AND 200
       OR p_type IS NULL OR p_type !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_type) > 200 THEN
        RAISE EXCEPTION 'apply_reference_effect: invalid argument'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'identity and key need 1..200 characters, type must match ^[a-z0-9][a-z0-9._@-]*$';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    PERFORM 1 FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'apply_reference_effect');
    END IF;

    SELECT e.revision INTO v_rev FROM mailbox.ref_effects AS e WHERE e.source = p_source AND e.identity = p_identity;
    IF FOUND THEN
        outcome := 'duplicate';
        revision := v_rev;
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO mailbox.ref_key_sequences AS ks (source, key, last_revision) VALUES (p_source, p_key, 1)
    ON CONFLICT (source, key) DO UPDATE SET last_revision = ks.last_revision + 1
    RETURNING ks.last_revision INTO v_rev;
    INSERT INTO mailbox.ref_effects (source, identity, msg_id, key, revision, type, applied_at)
    VALUES (p_source, p_identity, p_msg_id, p_key, v_rev, p_type, v_now);
    outcome := 'applied';
    revision := v_rev;
    RETURN NEXT;
END
$function$;

COMMENT ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) IS
    'Reference handler business effect: bind a business identity once (applied with the key''s next sequence, or duplicate), fenced by the head''s live lease. SPEC R-MX-9, R-MX-10.';

REVOKE ALL ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) TO outbox_mailbox;
