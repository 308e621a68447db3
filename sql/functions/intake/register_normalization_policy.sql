-- intake.register_normalization_policy(workload_principal_id text, policy_version text,
--   normalized_codes text[]) RETURNS void  (public, SPEC R-OB-1, §13)
-- Purpose: one cell of the per-workload normalization-policy matrix: the workload may send
--   errorNormalizationPolicyVersion = policy_version with a normalized code among
--   normalized_codes. Insert-or-compare (the code set is compared as a sorted, distinct set).
-- Locking: the primary key.
-- SQLSTATEs: 22023 unknown workload, literal out of form, empty or malformed code list;
--   OB702 the cell is registered with another code set.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION intake.register_normalization_policy(p_workload_principal_id text, p_policy_version text, p_normalized_codes text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_codes text[];
    v_old   text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM intake.workloads w WHERE w.workload_principal_id = p_workload_principal_id) THEN
        RAISE EXCEPTION 'intake: unknown workload principal %', p_workload_principal_id USING ERRCODE = '22023';
    END IF;
    IF p_policy_version IS NULL OR p_policy_version !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$' THEN
        RAISE EXCEPTION 'intake: policy version out of form' USING ERRCODE = '22023';
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT c COLLATE "C" ORDER BY c COLLATE "C") INTO v_codes FROM pg_catalog.unnest(p_normalized_codes) c;
    IF v_codes IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.unnest(v_codes) c WHERE c IS NULL OR c !~ '^[a-z0-9][a-z0-9._:-]{0,127}$') THEN
        RAISE EXCEPTION 'intake: normalized codes out of form'
            USING ERRCODE = '22023', DETAIL = 'at least one code, each [a-z0-9._:-]{1,128}';
    END IF;
    INSERT INTO intake.normalization_policies (workload_principal_id, policy_version, normalized_codes)
    VALUES (p_workload_principal_id, p_policy_version, v_codes)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT p.normalized_codes INTO v_old FROM intake.normalization_policies p
    WHERE p.workload_principal_id = p_workload_principal_id AND p.policy_version = p_policy_version;
    IF v_old IS DISTINCT FROM v_codes THEN
        RAISE EXCEPTION 'intake: normalization policy already registered with other codes'
            USING ERRCODE = 'OB702',
                  DETAIL = pg_catalog.format('workload %s policy %s: registrations are immutable (insert-or-compare)', p_workload_principal_id, p_policy_version);
    END IF;
END
$function$;

COMMENT ON FUNCTION intake.register_normalization_policy(text, text, text[]) IS
    'One cell of the per-workload normalization-policy matrix; insert-or-compare, OB702 on other codes (SPEC R-OB-1).';

REVOKE ALL ON FUNCTION intake.register_normalization_policy(text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_normalization_policy(text, text, text[]) TO outbox_registrar;
