-- outbox._ack_reject(p_detail text) RETURNS void  (private, SPEC R-AK-2, §13 OB002)
-- Raises OB002 "ack rejected" with p_detail naming the field that does not match. Keeps the
-- message of every ack rejection identical so callers and tests match on SQLSTATE + DETAIL.
-- Caller: outbox._ack_validate and outbox._publish_event; granted to nobody.
CREATE FUNCTION outbox._ack_reject(p_detail text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'ack rejected: %', p_detail
        USING ERRCODE = 'OB002', DETAIL = p_detail;
END
$fn$;

COMMENT ON FUNCTION outbox._ack_reject(text) IS
    'Private: raise OB002 (ack rejected) with a DETAIL naming the mismatching field (SPEC R-AK-2).';
REVOKE ALL ON FUNCTION outbox._ack_reject(text) FROM PUBLIC;
