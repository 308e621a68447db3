package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// R-CO-1, T-4: insert-or-compare. The first call inserts ("new") with the digest the Go kit
// computed (SQL and Go agree); the same event and envelope again answers "existing" with the
// FIRST receipt's ref and digest, even for a different candidate, and writes no second row;
// the same event id with a different envelope is OB301; read_receipt returns the stored
// canonical document, byte-identical to the Go one.
func TestInboxRecordReceiptInsertOrCompare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	env, sha, doc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": "first"})

	r, err := consumerfix.Record(ctx, conn, consumerfix.Metering, "", 0, env, doc.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != pgcall.ReceiptNew || r.Ref != doc.Ref || r.Digest != doc.Digest {
		t.Fatalf("first record = %+v, want new %s %s", r, doc.Ref, doc.Digest)
	}

	// Same event, same envelope, a different candidate (other fields, later time).
	var m map[string]any
	_ = json.Unmarshal(env, &m)
	other, err := testdb.Receipts(t).Build(reference.MeteringInputProcessorKind, receipt.Params{
		Ref: "other-ref", Destination: "metering_input_processor", ConsumerName: consumerfix.Metering, EventID: m["eventId"].(string),
		EventEnvelopeSHA256: sha, Time: time.Now().Add(time.Hour), Fields: receipt.Fields{"consumerOutcome": "second"}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := consumerfix.Record(ctx, conn, consumerfix.Metering, "", 0, env, other.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Outcome != pgcall.ReceiptExisting || r2.Ref != doc.Ref || r2.Digest != doc.Digest {
		t.Fatalf("second record = %+v, want existing with the first ref/digest", r2)
	}
	admin := testdb.Conn(t, dsn, "")
	if n := consumerfix.Receipts(t, admin, consumerfix.Metering, m["eventId"].(string)); n != 1 {
		t.Fatalf("%d receipt rows, want 1", n)
	}

	stored, err := pgcall.ReadReceipt(ctx, conn, pgcall.ReadReceiptParams{ConsumerName: consumerfix.Metering,
		EventID: m["eventId"].(string), EnvelopeSHA256: sha})
	if err != nil {
		t.Fatal(err)
	}
	if string(stored) != string(doc.Receipt) {
		t.Fatalf("stored receipt differs from the Go canonical document:\n%s\n%s", stored, doc.Receipt)
	}

	// Tampered envelope, same event id → OB301, from both functions.
	m["payload"] = map[string]any{"tampered": true}
	traw, _ := json.Marshal(m)
	tenv, _ := canon.Canonicalize(traw)
	tsha, _ := canon.SHA256Hex(tenv)
	tdoc, err := testdb.Receipts(t).Build(reference.MeteringInputProcessorKind, receipt.Params{Destination: "metering_input_processor",
		ConsumerName: consumerfix.Metering, EventID: m["eventId"].(string), EventEnvelopeSHA256: tsha})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consumerfix.Record(ctx, conn, consumerfix.Metering, "", 0, tenv, tdoc.Receipt); !errors.Is(err, pgcall.ErrReceiptConflict) {
		t.Fatalf("tampered envelope: err = %v, want OB301", err)
	}
	if _, err := pgcall.ReadReceipt(ctx, conn, pgcall.ReadReceiptParams{ConsumerName: consumerfix.Metering,
		EventID: m["eventId"].(string), EnvelopeSHA256: tsha}); !errors.Is(err, pgcall.ErrReceiptConflict) {
		t.Fatalf("read with another digest: err = %v, want OB301", err)
	}
	// Another consumer has its own receipt space: no conflict there.
	none, err := pgcall.ReadReceipt(ctx, conn, pgcall.ReadReceiptParams{ConsumerName: "someone_else",
		EventID: m["eventId"].(string), EnvelopeSHA256: tsha})
	if err != nil || none != nil {
		t.Fatalf("other consumer: %s, %v; want nil, nil", none, err)
	}
}

// R-CO-1: ref and digest may be left to the database: it assigns the deterministic default
// ref and fills in the digest it computes, equal to Go's.
func TestInboxRecordReceiptFillsRefAndDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "outbox_consumer")
	env, _, doc := consumerfix.EnvelopeAndReceipt(t, nil)
	var m map[string]any
	_ = json.Unmarshal(doc.Receipt, &m)
	delete(m, "meteringInputProcessorConsumerReceiptRef")
	delete(m, "meteringInputProcessorConsumerReceiptDigest")
	bare, _ := json.Marshal(m)
	r, err := consumerfix.Record(ctx, conn, consumerfix.Metering, "", 0, env, bare)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := receipt.DefaultRef(consumerfix.Metering, "", 0, m["eventId"].(string))
	if r.Outcome != "new" || r.Ref != wantRef || r.Digest != doc.Digest {
		t.Fatalf("record = %+v, want new %s %s", r, wantRef, doc.Digest)
	}
}

// R-CO-1, R-AK-1a: the database checks the receipt against the call, the envelope and the
// registry; every inconsistency is OB002 (nothing stored), a bad envelope OB105, a bad key
// 22023, a non-canonicalizable document OB201.
func TestInboxRecordReceiptRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	env, _, doc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": "recorded"})
	// edit changes the receipt and drops its digest (the database then computes it), so that
	// each case fails on its own check only; keep keeps the original digest.
	edit := func(f func(m map[string]any)) json.RawMessage {
		var m map[string]any
		_ = json.Unmarshal(doc.Receipt, &m)
		f(m)
		if m["meteringInputProcessorConsumerReceiptDigest"] == doc.Digest {
			delete(m, "meteringInputProcessorConsumerReceiptDigest")
		}
		b, _ := json.Marshal(m)
		return b
	}
	keep := func(f func(m map[string]any)) json.RawMessage {
		var m map[string]any
		_ = json.Unmarshal(doc.Receipt, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	// opsEnv/opsDoc: a valid operations receipt, to test the projection rules.
	opsEnvMap := testfix.Envelope("billing.finalization.committed@1", "1", "agg-"+testfix.NewUUID(), 1)
	opsRaw, _ := json.Marshal(opsEnvMap)
	opsEnv, _ := canon.Canonicalize(opsRaw)
	opsSHA, _ := canon.SHA256Hex(opsEnv)
	opsDoc, err := testdb.Receipts(t).Build(reference.OperationsProjectionKind, receipt.Params{Destination: "core_operations",
		ConsumerName: "operations_projector", EventID: opsEnvMap["eventId"].(string), EventEnvelopeSHA256: opsSHA,
		ProjectionName: "operations_timeline", ProjectionVersion: 1,
		EventType: "billing.finalization.committed@1", EventSchemaVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		consumer string
		projName string
		projVer  int
		env      json.RawMessage
		rcpt     json.RawMessage
		state    string
	}{
		{"wrong consumerName", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["consumerName"] = "other_consumer" }), "OB002"},
		{"wrong eventId", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["eventId"] = testfix.NewUUID() }), "OB002"},
		{"caller envelope digest", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["eventEnvelopeSha256"] = strings.Repeat("a", 64) }), "OB002"},
		{"wrong receipt digest", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["meteringInputProcessorConsumerReceiptDigest"] = strings.Repeat("b", 64) }), "OB002"},
		{"field changed after digest", consumerfix.Metering, "", 0, env, keep(func(m map[string]any) { m["consumerOutcome"] = "changed" }), "OB002"},
		{"schema version", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["meteringInputProcessorConsumerReceiptSchemaVersion"] = 2 }), "OB002"},
		{"algorithm", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["meteringInputProcessorConsumerReceiptDigestAlgorithmVersion"] = "sha1" }), "OB002"},
		{"time format", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["committedAt"] = "2026-01-01T00:00:00Z" }), "OB002"},
		{"two kinds", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["brokerPublicationReceiptRef"] = "x" }), "OB002"},
		{"no kind", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) {
			for k := range m {
				if strings.HasPrefix(k, "meteringInputProcessorConsumerReceipt") {
					delete(m, k)
				}
			}
		}), "OB002"},
		{"destination of another consumer", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["destination"] = "core_operations" }), "OB002"},
		{"projection fields without projection", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["projectionName"] = "x"; m["projectionVersion"] = 1 }), "OB002"},
		{"projection kind without projection", "operations_projector", "", 0, opsEnv, opsDoc.Receipt, "OB002"},
		{"projection other than the call's", "operations_projector", "operations_timeline", 2, opsEnv, opsDoc.Receipt, "OB002"},
		{"control: digest dropped", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) {}), ""},
		{"not an object", consumerfix.Metering, "", 0, env, json.RawMessage(`[1]`), "OB002"},
		{"unsafe number", consumerfix.Metering, "", 0, env, edit(func(m map[string]any) { m["n"] = 1.5 }), "OB201"},
		{"envelope without eventId", consumerfix.Metering, "", 0, json.RawMessage(`{"eventType":"x"}`), doc.Receipt, "OB105"},
		{"bad consumer name", "Bad Name", "", 0, env, doc.Receipt, "22023"},
		{"version without name", consumerfix.Metering, "", 1, env, doc.Receipt, "22023"},
	}
	for _, tc := range cases {
		_, err := consumerfix.Record(ctx, conn, tc.consumer, tc.projName, tc.projVer, tc.env, tc.rcpt)
		if got := consumerfix.SQLState(err); got != tc.state {
			t.Errorf("%s: SQLSTATE %q (%v), want %s", tc.name, got, err, tc.state)
		}
	}
	admin := testdb.Conn(t, dsn, "")
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts`); n != 1 {
		t.Fatalf("%d receipts stored, want only the control's", n)
	}
	// The valid operations receipt is accepted with its projection.
	if r, err := consumerfix.Record(ctx, conn, "operations_projector", "operations_timeline", 1, opsEnv, opsDoc.Receipt); err != nil || r.Outcome != "new" {
		t.Fatalf("valid operations receipt: %+v, %v", r, err)
	}
}

// R-CO-1 (concurrency): two transactions record the same receipt at once; the second waits
// for the first and, once it commits, answers "existing" with the first's ref/digest. With a
// different envelope it answers OB301 instead. Real connections, step by step.
func TestInboxRecordReceiptConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	a := testdb.Conn(t, dsn, "outbox_consumer")
	b := testdb.Conn(t, dsn, "outbox_consumer")
	admin := testdb.Conn(t, dsn, "")
	env, sha, doc := consumerfix.EnvelopeAndReceipt(t, nil)
	var m map[string]any
	_ = json.Unmarshal(env, &m)
	second, _ := testdb.Receipts(t).Build(reference.MeteringInputProcessorKind, receipt.Params{Ref: "second-ref",
		Destination: "metering_input_processor", ConsumerName: consumerfix.Metering, EventID: m["eventId"].(string), EventEnvelopeSHA256: sha})

	txA, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := consumerfix.Record(ctx, txA, consumerfix.Metering, "", 0, env, doc.Receipt); err != nil || r.Outcome != "new" {
		t.Fatalf("A: %+v, %v", r, err)
	}
	var bPID int
	if err := b.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&bPID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var rB pgcall.RecordReceiptResult
	var errB error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rB, errB = consumerfix.Record(ctx, b, consumerfix.Metering, "", 0, env, second.Receipt)
	}()
	ckWaitBlocked(t, admin, bPID) // B waits on A's uncommitted row
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if errB != nil || rB.Outcome != "existing" || rB.Ref != doc.Ref || rB.Digest != doc.Digest {
		t.Fatalf("B: %+v, %v; want existing %s", rB, errB, doc.Ref)
	}
	if n := consumerfix.Receipts(t, admin, consumerfix.Metering, m["eventId"].(string)); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

// ckWaitBlocked waits until backend pid is waiting for a lock (a condition, not a sleep).
func ckWaitBlocked(t *testing.T, admin pgcall.DBTX, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		if err := admin.QueryRow(context.Background(),
			`SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("backend %d never blocked on a lock", pid)
}
