package tests

import (
	"bytes"
	"context"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
)

// D-2, R-CO-2: the consumer kit records its receipts through the hot path, inside its one
// transaction per event. A tripwire proves it: in this database outbox.jcs_sha256 (what the
// slow path digests with) raises, and every reference consumer still acknowledges; the stored
// receipt is the kit's canonical receipt byte for byte, a redelivery answers the same bytes,
// and the audit sweep finds nothing to report.
func TestConsumerKitUsesReceiptHotPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := ckSetup(t)
	admin := testdb.Conn(t, b.dsn, "")
	if _, err := admin.Exec(ctx, `CREATE OR REPLACE FUNCTION outbox.jcs_sha256(p_doc json) RETURNS text
		LANGUAGE plpgsql IMMUTABLE STRICT AS $$ BEGIN RAISE EXCEPTION 'tripwire: jcs_sha256 called' USING ERRCODE = 'XX999'; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, spec := range reference.All() {
		kit := b.kit(t, spec.ConsumerName, nil)
		d := ckDelivery(t, spec, ckEnv(spec.Events[0], "agg-hot-"+spec.ConsumerName, 1))
		first := ckWantAck(t, ckDeliver(t, kit, d))
		stored, err := pgcall.ReadReceipt(ctx, b.pool, pgcall.ReadReceiptParams{ConsumerName: spec.ConsumerName,
			ProjectionName: spec.ProjectionName, ProjectionVersion: spec.ProjectionVersion, EventID: d.EventID,
			EnvelopeSHA256: d.EnvelopeSHA256})
		if err != nil || !bytes.Equal(stored, first.Receipt) {
			t.Fatalf("%s: stored %s (%v), kit answered %s", spec.ConsumerName, stored, err, first.Receipt)
		}
		again := ckWantAck(t, ckDeliver(t, kit, d))
		if !bytes.Equal(again.Receipt, first.Receipt) || !bytes.Equal(again.Ack, first.Ack) {
			t.Fatalf("%s: redelivery answered other bytes", spec.ConsumerName)
		}
		if n := ckEffects(t, admin, spec, d.EventID); n != 1 {
			t.Fatalf("%s: applied %d times", spec.ConsumerName, n)
		}
	}
	// The sweep itself canonicalizes: restore the real digest function first.
	if _, err := admin.Exec(ctx, `CREATE OR REPLACE FUNCTION outbox.jcs_sha256(p_doc json) RETURNS text
		LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
		AS $$ BEGIN RETURN outbox._sha256_hex(outbox.jcs_canonicalize(p_doc)); END $$`); err != nil {
		t.Fatal(err)
	}
	aud := testdb.Conn(t, b.dsn, "outbox_auditor")
	if p, err := pgcall.VerifyReceiptDigests(ctx, aud, 100); err != nil || len(p) != 0 {
		t.Fatalf("verify_receipt_digests: %v, %v", p, err)
	}
}
