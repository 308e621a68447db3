package readmodel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/transport"
)

// R-OP-2: the projector's inbox in ANOTHER database. The Go companion snapshots the producer
// (stored manifest) and then the inbox, and records the two-part document beside the manifest
// (immutable, content-addressed, its status checked against its guards by the database); the
// two-part proof is complete when every acknowledged
// projection delivery has its receipt (same envelope digest) in the inbox and no gap is open.
// A receipt lost at the projector (a restore) leaves the producer's own proof complete - its
// evidence is the verified ack - but turns the two-part proof stale, and a new one partial with
// the receipt anti-join naming the event.
func TestCompletenessTwoDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prodDB := rmSetup(t)       // producer database
	kb := consumerfix.Setup(t) // the consumers' database (inbox + reference schemas)
	inboxAud := testdb.Conn(t, kb.Dsn, "outbox_auditor")
	trs := map[string]transport.Transport{}
	dests := map[string]config.Destination{}
	for _, spec := range reference.All() {
		kit := kb.Kit(t, spec.ConsumerName, nil)
		trs[spec.Destination] = transport.Func(kit.Deliver)
		dests[spec.Destination] = config.Destination{Transport: config.TransportInProcess, Auth: config.AuthNone}
	}
	d := dispatcherfix.Start(t, &dispatcherfix.DB{Dsn: prodDB.Dsn, Admin: prodDB.Admin}, dispatcherfix.Config("rm-two", dests), trs)
	p := scenario.Producer{Conn: testdb.Conn(t, prodDB.Dsn, "outbox_producer"), Prefix: "two"}
	testfix.Must(t, p.Runs(ctx, 1, 3))
	dispatcherfix.Eventually(t, "drained", func() bool {
		return kernelfix.QueryInt(t, prodDB.Admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status <> 'acknowledged'`) == 0
	})
	testfix.Must(t, d.Stop(t))

	proof, err := readmodel.TakeTwoPart(ctx, prodDB.aud, inboxAud, json.RawMessage(`{}`))
	testfix.Must(t, err)
	if proof.Status != rmComplete || proof.Producer.Status != rmComplete {
		t.Fatalf("two-part proof: %s (producer %s): %s", proof.Status, proof.Producer.Status, proof.Document)
	}
	if f, r, err := readmodel.CheckTwoPart(ctx, prodDB.aud, inboxAud, proof); err != nil || f != "verified_current" {
		t.Fatalf("fresh two-part proof: %s %s %v", f, r, err)
	}
	again, err := readmodel.TakeTwoPart(ctx, prodDB.aud, inboxAud, json.RawMessage(`{}`))
	testfix.Must(t, err)
	if again.SHA256 != proof.SHA256 {
		t.Fatal("same state, different two-part digests")
	}

	// Each part is recorded in the producer database: the two-part document, immutable and
	// content-addressed, bound to the stored producer manifest (one row for both takes).
	stored, found, err := pgcall.ReadTwoPartProof(ctx, prodDB.aud, proof.SHA256)
	if err != nil || !found || stored.Status != rmComplete || string(stored.Document) != string(proof.Document) {
		t.Fatalf("stored two-part proof: found %v status %s err %v", found, stored.Status, err)
	}
	if n := kernelfix.QueryInt(t, prodDB.Admin, `SELECT count(*)::int FROM outbox.completeness_two_part_proofs`); n != 1 {
		t.Fatalf("%d stored two-part proofs, want 1", n)
	}
	for _, q := range []string{`UPDATE outbox.completeness_two_part_proofs SET status = 'unknown'`,
		`DELETE FROM outbox.completeness_two_part_proofs`, `TRUNCATE outbox.completeness_two_part_proofs`} {
		_, err := testdb.Conn(t, prodDB.Dsn, "outbox_owner").Exec(ctx, q)
		kernelfix.WantSQLState(t, err, "OB202", q)
	}
	// The database refuses a two-part document whose status does not follow from its guards, or
	// that names no stored manifest; only the auditor records one.
	var forged map[string]any
	testfix.Must(t, json.Unmarshal(proof.Document, &forged))
	forged["parts"].([]any)[1].(map[string]any)["receiptAntiJoin"].(map[string]any)["count"] = 1
	fb, _ := json.Marshal(forged)
	_, err = pgcall.RecordTwoPartProof(ctx, prodDB.aud, fb)
	kernelfix.WantSQLState(t, err, "22023", "complete status with a non-zero anti-join")
	forged["parts"].([]any)[1].(map[string]any)["receiptAntiJoin"].(map[string]any)["count"] = 0
	forged["parts"].([]any)[0].(map[string]any)["manifestSha256"] = strings.Repeat("0", 64)
	fb, _ = json.Marshal(forged)
	_, err = pgcall.RecordTwoPartProof(ctx, prodDB.aud, fb)
	kernelfix.WantSQLState(t, err, "22023", "unknown producer manifest")
	_, err = pgcall.RecordTwoPartProof(ctx, prodDB.Disp, proof.Document)
	kernelfix.WantSQLState(t, err, "42501", "dispatcher records a two-part proof")
	if f, r, err := readmodel.CheckTwoPart(ctx, prodDB.aud, inboxAud, readmodel.TwoPartProof{Producer: proof.Producer,
		Document: fb, SHA256: strings.Repeat("1", 64)}); err != nil || f != "unverified" {
		t.Fatalf("a two-part proof never recorded: %s %s %v", f, r, err)
	}

	// A receipt lost at the projector.
	var lost string
	testfix.Must(t, kb.Pool.QueryRow(ctx, `SELECT event_id::text FROM inbox.inbox_receipts WHERE consumer_name = 'operations_projector' ORDER BY event_id LIMIT 1`).Scan(&lost))
	tx, err := kb.Pool.Begin(ctx)
	testfix.Must(t, err)
	for _, q := range []string{`SET LOCAL session_replication_role = replica`,
		`DELETE FROM inbox.inbox_receipts WHERE consumer_name = 'operations_projector' AND event_id = '` + lost + `'`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	testfix.Must(t, tx.Commit(ctx))
	if f, r, err := readmodel.CheckTwoPart(ctx, prodDB.aud, inboxAud, proof); err != nil || f != "stale" || r != "source_changed" {
		t.Fatalf("after a lost receipt: %s %s %v", f, r, err)
	}
	if f := rmCheck(t, prodDB.aud, proof.Producer.ManifestID); f != "verified_current" {
		t.Fatalf("the producer's part alone: %s", f)
	}
	partial, err := readmodel.TakeTwoPart(ctx, prodDB.aud, inboxAud, json.RawMessage(`{}`))
	testfix.Must(t, err)
	var doc struct {
		Parts []struct {
			ReceiptAntiJoin *struct {
				Count int `json:"count"`
			} `json:"receiptAntiJoin"`
		} `json:"parts"`
	}
	testfix.Must(t, json.Unmarshal(partial.Document, &doc))
	if partial.Status != rmPartial || len(doc.Parts) != 2 || doc.Parts[1].ReceiptAntiJoin == nil || doc.Parts[1].ReceiptAntiJoin.Count != 1 {
		t.Fatalf("after a lost receipt: %s %s", partial.Status, partial.Document)
	}
}
