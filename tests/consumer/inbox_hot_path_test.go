package consumer

// The receipt hot path of inbox.record_receipt (SPEC D-2 "hot path for receipts", R-AK-1a,
// R-CO-1): the caller passes the canonical receipt and the canonical text of its digest
// candidate; the database verifies instead of canonicalizing and must accept exactly what the
// slow path (no candidate) accepts, store the same document and digest, and refuse with the same
// SQLSTATE. inbox.verify_receipt_digests re-canonicalizes what the hot path trusted.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// hpConsumer is one consumer whose receipts the tests record: the four reference consumers
// and a broker publication (a kind no inbox destination is registered for, still closed).
type hpConsumer struct {
	kind                   receipt.Kind
	consumer, destination  string
	projName               string
	projVersion            int
	eventType, eventSchema string
	fields                 receipt.Fields
}

func hpConsumers() []hpConsumer {
	var out []hpConsumer
	for _, s := range reference.All() {
		c := hpConsumer{kind: s.Kind, consumer: s.ConsumerName, destination: s.Destination,
			projName: s.ProjectionName, projVersion: s.ProjectionVersion, eventType: s.Events[0].EventType,
			eventSchema: s.Events[0].SchemaVersion, fields: receipt.Fields{"consumerOutcome": "recorded"}}
		if s.Kind == reference.OperationsProjectionKind {
			c.fields = receipt.Fields{"projectionOutcome": "applied"}
		}
		out = append(out, c)
	}
	return append(out, hpConsumer{kind: receipt.BrokerPublication, consumer: "nats_bridge", destination: "nats_outbox",
		eventType: "run.created@2.0", eventSchema: "2.0", fields: receipt.BrokerFields("outbox", 42, true)})
}

// build returns a canonical envelope for c and the receipt the kit would build for it.
func (c hpConsumer) build(t *testing.T) (json.RawMessage, receipt.Document) {
	t.Helper()
	env := testfix.Envelope(c.eventType, c.eventSchema, "agg-"+testfix.NewUUID(), 1)
	raw, _ := json.Marshal(env)
	canonical, sha, err := canon.CanonicalizeDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := receipt.Params{Destination: c.destination, ConsumerName: c.consumer, EventID: env["eventId"].(string),
		EventEnvelopeSHA256: sha, ProjectionName: c.projName, ProjectionVersion: c.projVersion, Fields: c.fields}
	if c.kind == reference.OperationsProjectionKind {
		p.EventType, p.EventSchemaVersion = c.eventType, c.eventSchema
	}
	doc, err := testdb.Receipts(t).Build(c.kind, p)
	if err != nil {
		t.Fatal(err)
	}
	return canonical, doc
}

func (c hpConsumer) params(env, rcpt, candidate json.RawMessage) pgcall.RecordReceiptParams {
	return pgcall.RecordReceiptParams{ConsumerName: c.consumer, ProjectionName: c.projName, ProjectionVersion: c.projVersion,
		EventEnvelope: env, Receipt: rcpt, DigestCandidate: candidate}
}

// hpStored is what one record_receipt call did: its row, the stored document, or its error.
type hpStored struct {
	res pgcall.RecordReceiptResult
	doc string
	err error
}

// hpTry records in a transaction that is rolled back and returns the result and the stored
// document as inbox.read_receipt returns it.
func hpTry(t *testing.T, conn *pgx.Conn, c hpConsumer, p pgcall.RecordReceiptParams) hpStored {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	r, err := pgcall.RecordReceipt(ctx, tx, p)
	if err != nil {
		return hpStored{err: err}
	}
	_, sha, _ := canon.CanonicalizeDigest(p.EventEnvelope)
	doc, err := pgcall.ReadReceipt(ctx, tx, pgcall.ReadReceiptParams{ConsumerName: c.consumer, ProjectionName: c.projName,
		ProjectionVersion: c.projVersion, EventID: hpEventID(t, p.EventEnvelope), EnvelopeSHA256: sha})
	if err != nil {
		t.Fatalf("read receipt: %v", err)
	}
	return hpStored{res: r, doc: string(doc)}
}

func hpEdit(t *testing.T, doc json.RawMessage, f func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Canonicalize(b)
	if err != nil {
		return b // not canonicalizable on purpose: passed as is
	}
	return c
}

func hpEventID(t *testing.T, env json.RawMessage) string {
	t.Helper()
	var m struct{ EventID string }
	if err := json.Unmarshal(env, &m); err != nil || m.EventID == "" {
		t.Fatalf("envelope without eventId: %v", err)
	}
	return m.EventID
}

func hpPretty(t *testing.T, doc json.RawMessage) json.RawMessage {
	t.Helper()
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// D-2, R-CO-1: for every kind, the hot path (canonical receipt + candidate) stores exactly the
// document and digest the slow path stores and the Go kit built; so do the hot path with a
// pretty-printed receipt or envelope (the database canonicalizes those) and with the digest or
// ref left to the database; verify_receipt_digests finds nothing wrong with any of them.
func TestInboxHotPathSameAsSlowPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	for _, c := range hpConsumers() {
		env, doc := c.build(t)
		info, _ := testdb.Receipts(t).Lookup(c.kind)
		slow := hpTry(t, conn, c, c.params(env, doc.Receipt, nil))
		if slow.err != nil {
			t.Fatalf("%s slow path: %v", c.kind, slow.err)
		}
		if slow.res.Outcome != pgcall.ReceiptNew || slow.res.Ref != doc.Ref || slow.res.Digest != doc.Digest || slow.doc != string(doc.Receipt) {
			t.Fatalf("%s slow path stored %+v %s, want the Go document %s", c.kind, slow.res, slow.doc, doc.Receipt)
		}
		noDigest := hpEdit(t, doc.Receipt, func(m map[string]any) { delete(m, info.DigestField()) })
		noRef := hpEdit(t, doc.Receipt, func(m map[string]any) { delete(m, info.RefField()) })
		variants := map[string]pgcall.RecordReceiptParams{
			"canonical":           c.params(env, doc.Receipt, doc.Candidate),
			"pretty receipt":      c.params(env, hpPretty(t, doc.Receipt), doc.Candidate),
			"pretty envelope":     c.params(hpPretty(t, env), doc.Receipt, doc.Candidate),
			"digest filled in":    c.params(env, noDigest, doc.Candidate),
			"slow, digest filled": c.params(env, noDigest, nil),
		}
		for name, p := range variants {
			hot := hpTry(t, conn, c, p)
			if hot.err != nil {
				t.Fatalf("%s %s: %v", c.kind, name, hot.err)
			}
			if hot != slow {
				t.Fatalf("%s %s: stored %+v %s, slow path %+v %s", c.kind, name, hot.res, hot.doc, slow.res, slow.doc)
			}
		}
		// Ref left to the database: the default ref on both paths, the same document.
		slowNoRef := hpTry(t, conn, c, c.params(env, noRef, nil))
		hotNoRef := hpTry(t, conn, c, c.params(env, noRef, doc.Candidate))
		if slowNoRef.err != nil || hotNoRef != slowNoRef || slowNoRef.res.Ref != receipt.DefaultRef(c.consumer, c.projName, c.projVersion, hpEventID(t, env)) {
			t.Fatalf("%s without ref: hot %+v, slow %+v", c.kind, hotNoRef, slowNoRef)
		}
		// Committed through the hot path, the audit sweep agrees.
		if r, err := pgcall.RecordReceipt(ctx, conn, c.params(env, doc.Receipt, doc.Candidate)); err != nil || r.Outcome != pgcall.ReceiptNew {
			t.Fatalf("%s: %+v, %v", c.kind, r, err)
		}
		if r, err := pgcall.RecordReceipt(ctx, conn, c.params(env, doc.Receipt, doc.Candidate)); err != nil || r.Outcome != pgcall.ReceiptExisting {
			t.Fatalf("%s again: %+v, %v", c.kind, r, err)
		}
	}
	aud := testdb.Conn(t, dsn, "outbox_auditor")
	problems, err := pgcall.VerifyReceiptDigests(ctx, aud, 1000)
	if err != nil || len(problems) != 0 {
		t.Fatalf("verify_receipt_digests: %v, %v", problems, err)
	}
}

// hpSeal recomputes the digest of receipt document m (a decoded receipt of kind info) the way
// a consumer would and returns the receipt and its candidate, canonical when they can be.
func hpSeal(t *testing.T, info receipt.Info, m map[string]any) (rcpt, candidate json.RawMessage) {
	t.Helper()
	cand := map[string]any{}
	for k, v := range m {
		if k != info.RefField() && k != info.DigestField() && k != info.TimeField {
			cand[k] = v
		}
	}
	raw, err := json.Marshal(cand)
	if err != nil {
		t.Fatal(err)
	}
	c, sha, err := canon.CanonicalizeDigest(raw)
	if err != nil {
		c, sha = raw, strings.Repeat("c", 64) // not canonicalizable on purpose
	}
	m[info.DigestField()] = sha
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := canon.Canonicalize(raw); err == nil {
		raw = r
	}
	return raw, c
}

// D-2 "the hot path accepts exactly what the slow path accepts", R-AK-1a: a candidate that is not
// canonical text is OB201; a canonical candidate that is not the receipt's is OB002; receipts
// that the slow path refuses are refused by the hot path with the same SQLSTATE (unknown or
// mistyped member, missing required member, unsafe number, wrong digest, an envelope whose
// bytes hash to the claim but are not canonical, a tampered envelope). Nothing is stored.
func TestInboxHotPathRefusesLikeSlowPath(t *testing.T) {
	t.Parallel()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	for _, c := range hpConsumers() {
		info, _ := testdb.Receipts(t).Lookup(c.kind)
		env, doc := c.build(t)
		decoded := func() map[string]any {
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(string(doc.Receipt)))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		sealed := func(f func(m map[string]any)) (json.RawMessage, json.RawMessage) {
			m := decoded()
			f(m)
			return hpSeal(t, info, m)
		}
		cand := string(doc.Candidate)
		otherTime := "appliedAt"
		if info.TimeField == otherTime {
			otherTime = "committedAt"
		}
		// A member of this kind with the wrong JSON type, and a required member to drop.
		var mistyped, required string
		for _, m := range testdb.Receipts(t).Members(c.kind) {
			if _, ok := c.fields[m.Name]; ok && mistyped == "" {
				mistyped = m.Name
			}
			if m.Required && required == "" {
				required = m.Name
			}
		}
		// A pretty-printed envelope whose own bytes' sha256 the receipt claims.
		prettyEnv := hpPretty(t, env)
		claimPretty, claimCand := sealed(func(m map[string]any) { m["eventEnvelopeSha256"] = canon.SumHex(prettyEnv) })
		tampered := hpEdit(t, env, func(m map[string]any) { m["payload"] = map[string]any{"tampered": true} })

		type tc struct {
			name       string
			env        json.RawMessage
			rcpt, cand json.RawMessage
			hot, slow  string // SQLSTATE on the hot path / of the same receipt on the slow path ("-": not run)
			detail     string // a word the hot path's DETAIL must name
		}
		cases := []tc{
			{"control", env, doc.Receipt, doc.Candidate, "", "", ""},
			{"candidate with a space", env, doc.Receipt, json.RawMessage(strings.Replace(cand, ":", ": ", 1)), "OB201", "", ""},
			{"candidate with a newline", env, doc.Receipt, json.RawMessage(cand + "\n"), "OB201", "", ""},
			{"candidate members reordered", env, doc.Receipt, json.RawMessage(hpReorder(t, doc.Candidate)), "OB201", "", ""},
			{"candidate escape not canonical", env, doc.Receipt, json.RawMessage(strings.Replace(cand, "jcs-sha256", `jcs\u002dsha256`, 1)), "OB201", "", ""},
			{"candidate integer as float", env, doc.Receipt, json.RawMessage(strings.Replace(cand, `SchemaVersion":1`, `SchemaVersion":1.0`, 1)), "OB201", "", ""},
			{"candidate not JSON", env, doc.Receipt, json.RawMessage(`{"a":`), "OB201", "", ""},
			{"candidate empty", env, doc.Receipt, json.RawMessage(``), "OB201", "", ""},
			{"candidate of another receipt", env, doc.Receipt, json.RawMessage(strings.Replace(cand, `"destination":"`, `"destination":"x`, 1)), "OB002", "", "candidate"},
			{"candidate with the time", env, doc.Receipt, doc.Receipt, "OB002", "", "candidate"},
			{"unsafe number", env, nil, nil, "OB201", "OB201", ""},
			{"unknown member", env, nil, nil, "OB002", "OB002", `"note"`},
			{"time field of another kind", env, nil, nil, "OB002", "OB002", `"` + otherTime + `"`},
			{"digest differs", env, hpEdit(t, doc.Receipt, func(m map[string]any) { m[info.DigestField()] = strings.Repeat("b", 64) }), doc.Candidate, "OB002", "OB002", ""},
			{"envelope tampered", tampered, doc.Receipt, doc.Candidate, "OB002", "OB002", "eventEnvelopeSha256"},
			{"envelope bytes not canonical, claimed by their sha256", prettyEnv, claimPretty, claimCand, "OB002", "OB002", ""},
			{"envelope with a duplicate key", json.RawMessage(strings.Replace(string(env), `{`, `{"eventId":"x",`, 1)), doc.Receipt, doc.Candidate, "OB201", "OB201", ""},
		}
		for i := range cases {
			switch cases[i].name {
			case "unsafe number":
				cases[i].rcpt, cases[i].cand = sealed(func(m map[string]any) { m["note"] = 1.5 })
			case "unknown member":
				cases[i].rcpt, cases[i].cand = sealed(func(m map[string]any) { m["note"] = "x" })
			case "time field of another kind":
				cases[i].rcpt, cases[i].cand = sealed(func(m map[string]any) { m[otherTime] = "2026-01-01T00:00:00.000000Z" })
			}
		}
		if mistyped != "" {
			r, cd := sealed(func(m map[string]any) { m[mistyped] = []any{"x"} })
			cases = append(cases, tc{"member of the wrong type", env, r, cd, "OB002", "OB002", `"` + mistyped + `"`})
		}
		if required != "" {
			r, cd := sealed(func(m map[string]any) { delete(m, required) })
			cases = append(cases, tc{"required member missing", env, r, cd, "OB002", "OB002", required})
		}
		for _, k := range cases {
			hot := hpTry(t, conn, c, c.params(k.env, k.rcpt, k.cand))
			if got := consumerfix.SQLState(hot.err); got != k.hot {
				t.Errorf("%s %s: hot path SQLSTATE %q (%v), want %q", c.kind, k.name, got, hot.err, k.hot)
			}
			var pgErr *pgconn.PgError
			if k.detail != "" && (!errors.As(hot.err, &pgErr) || !strings.Contains(pgErr.Message+" "+pgErr.Detail, k.detail)) {
				t.Errorf("%s %s: error %v does not name %s", c.kind, k.name, hot.err, k.detail)
			}
			if k.slow != "-" {
				slow := hpTry(t, conn, c, c.params(k.env, k.rcpt, nil))
				if got := consumerfix.SQLState(slow.err); got != k.slow {
					t.Errorf("%s %s: slow path SQLSTATE %q (%v), want %q", c.kind, k.name, got, slow.err, k.slow)
				}
			}
		}
	}
	admin := testdb.Conn(t, dsn, "")
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts`); n != 0 {
		t.Fatalf("%d receipts stored by calls that were rolled back", n)
	}
}

// hpReorder writes the members of a flat canonical object in reverse order.
func hpReorder(t *testing.T, doc json.RawMessage) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		parts = append(parts, string(kb)+":"+string(m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// D-2: on the hot path the database does not canonicalize: outbox.jcs_sha256 is never called
// and outbox.jcs_canonicalize only from within outbox._jcs_text_problem (its fallback), which
// runs once for the envelope and once for the receipt; the slow path calls jcs_sha256. Counted
// with track_functions in the session's not yet flushed statistics (pg_stat_xact_user_functions).
func TestInboxHotPathDoesNotCanonicalize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	c := hpConsumers()[1]
	calls := func(candidate bool) map[string]int {
		// A fresh session: pending function statistics accumulate per backend until flushed.
		conn := testdb.Conn(t, dsn, "")
		env, doc := c.build(t)
		p := c.params(env, doc.Receipt, nil)
		if candidate {
			p.DigestCandidate = doc.Candidate
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_consumer`); err != nil {
			t.Fatal(err)
		}
		if r, err := pgcall.RecordReceipt(ctx, tx, p); err != nil || r.Outcome != pgcall.ReceiptNew {
			t.Fatalf("record: %+v, %v", r, err)
		}
		if _, err := tx.Exec(ctx, `RESET ROLE`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `SELECT schemaname || '.' || funcname, calls::int FROM pg_stat_xact_user_functions`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for rows.Next() {
			var f string
			var n int
			if err := rows.Scan(&f, &n); err != nil {
				t.Fatal(err)
			}
			got[f] += n
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return got
	}
	hot := calls(true)
	if hot["inbox.record_receipt"] != 1 || hot["outbox.jcs_sha256"] != 0 || hot["outbox._jcs_text_problem"] != 2 ||
		hot["outbox.jcs_canonicalize"] > hot["outbox._jcs_text_problem"] {
		t.Fatalf("hot path calls %v: want record_receipt 1, jcs_sha256 0, _jcs_text_problem 2, jcs_canonicalize only inside it", hot)
	}
	slow := calls(false)
	if slow["inbox.record_receipt"] != 1 || slow["outbox.jcs_sha256"] != 1 {
		t.Fatalf("slow path calls %v: want record_receipt 1, jcs_sha256 1 (the candidate digest)", slow)
	}
}

// D-2, R-CO-1: the audit sweep re-canonicalizes stored receipts: clean ones are not reported;
// a superuser's tampering below the kernel is (a changed member: digest; a re-serialized text:
// not canonical; a changed ref, outside the digest: column mismatch; garbage: not
// canonicalizable). Only the auditor may run it; max_rows is bounded.
func TestInboxVerifyReceiptDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	admin := testdb.Conn(t, dsn, "")
	aud := testdb.Conn(t, dsn, "outbox_auditor")
	c := hpConsumers()[1] // metering
	var ids []string
	for i := 0; i < 6; i++ {
		env, doc := c.build(t)
		if _, err := pgcall.RecordReceipt(ctx, conn, c.params(env, doc.Receipt, doc.Candidate)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, hpEventID(t, env))
	}
	if p, err := pgcall.VerifyReceiptDigests(ctx, aud, 100); err != nil || len(p) != 0 {
		t.Fatalf("clean inbox: %v, %v", p, err)
	}
	if _, err := admin.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	tamper := []struct{ sql, problem string }{
		{`UPDATE inbox.inbox_receipts SET receipt_document = replace(receipt_document, '"recorded"', '"forged"') WHERE event_id = $1::uuid`, "digest_mismatch"},
		{`UPDATE inbox.inbox_receipts SET receipt_document = jsonb_pretty(receipt_document::jsonb) WHERE event_id = $1::uuid`, "not_canonical"},
		{`UPDATE inbox.inbox_receipts SET receipt_document = replace(receipt_document, 'ReceiptRef":"', 'ReceiptRef":"x') WHERE event_id = $1::uuid`, "column_mismatch: meteringInputProcessorConsumerReceiptRef"},
		{`UPDATE inbox.inbox_receipts SET receipt_document = '{"a":1.5}' WHERE event_id = $1::uuid`, "not_canonicalizable"},
		{`UPDATE inbox.inbox_receipts SET receipt_digest = repeat('d', 64) WHERE event_id = $1::uuid`, "digest_mismatch"},
	}
	for i, tm := range tamper {
		if tag, err := admin.Exec(ctx, tm.sql, ids[i]); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v, %v", tm.sql, tag, err)
		}
	}
	if _, err := admin.Exec(ctx, `RESET session_replication_role`); err != nil {
		t.Fatal(err)
	}
	problems, err := pgcall.VerifyReceiptDigests(ctx, aud, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	for _, p := range problems {
		if p.ConsumerName != c.consumer {
			t.Errorf("problem for consumer %s", p.ConsumerName)
		}
		found[p.EventID] = append(found[p.EventID], p.Problem)
	}
	for i, tm := range tamper {
		ok := false
		for _, p := range found[ids[i]] {
			ok = ok || strings.HasPrefix(p, tm.problem)
		}
		if !ok {
			t.Errorf("tampering %q: reported %v, want %s", tm.sql, found[ids[i]], tm.problem)
		}
	}
	if len(found[ids[5]]) != 0 || len(found) != len(tamper) {
		t.Errorf("reported %v: the clean receipt %s must not be reported", found, ids[5])
	}
	if p, err := pgcall.VerifyReceiptDigests(ctx, aud, 1); err != nil || len(p) > 2 {
		t.Errorf("max_rows 1: %v, %v", p, err)
	}
	for _, n := range []int{0, 1000001} {
		if _, err := pgcall.VerifyReceiptDigests(ctx, aud, n); consumerfix.SQLState(err) != "22023" {
			t.Errorf("max_rows %d: %v, want 22023", n, err)
		}
	}
	if _, err := pgcall.VerifyReceiptDigests(ctx, conn, 10); consumerfix.SQLState(err) != "42501" {
		t.Errorf("outbox_consumer running the sweep: %v, want 42501", err)
	}
}

// R-AK-1a, SPEC §13: the catalog the Go kit loads (receipt.LoadCatalog as outbox_consumer, the
// kit's role) is exactly the rows of outbox.receipt_kinds and outbox.receipt_kind_members, and the
// published JSON Schema of each receipt type is closed over exactly the common members and the
// catalog's members (same JSON types, same required ones).
func TestReceiptCatalogMatchesTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	cat, err := receipt.LoadCatalog(ctx, testdb.Conn(t, dsn, "outbox_consumer"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []receipt.Info
	rows, err := admin.Query(ctx, `SELECT receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection
		FROM outbox.receipt_kinds ORDER BY receipt_kind`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var in receipt.Info
		if err := rows.Scan(&in.Kind, &in.ReceiptType, &in.Prefix, &in.TimeField, &in.SchemaVersion, &in.RequiresProjection); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, in)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for i := range kinds {
		mrows, err := admin.Query(ctx, `SELECT member, json_type, required, minimum FROM outbox.receipt_kind_members
			WHERE receipt_kind = $1 ORDER BY member COLLATE "C"`, string(kinds[i].Kind))
		if err != nil {
			t.Fatal(err)
		}
		for mrows.Next() {
			var m receipt.Member
			if err := mrows.Scan(&m.Name, &m.JSONType, &m.Required, &m.Minimum); err != nil {
				t.Fatal(err)
			}
			kinds[i].Members = append(kinds[i].Members, m)
		}
		if mrows.Err() != nil {
			t.Fatal(mrows.Err())
		}
	}
	got, _ := json.Marshal(cat.Kinds())
	want, _ := json.Marshal(kinds)
	if len(kinds) == 0 || string(got) != string(want) {
		t.Fatalf("catalog %s\ntables %s", got, want)
	}
	for _, info := range cat.Kinds() {
		byName := map[string]receipt.Member{}
		shape := make([]receipt.Member, len(info.Members)) // name, type, required: what both list
		for i, m := range info.Members {
			byName[m.Name] = m
			shape[i] = receipt.Member{Name: m.Name, JSONType: m.JSONType, Required: m.Required}
		}
		got, _ := json.Marshal(shape)
		schema := testfix.LoadSchema(t, info.ReceiptType+"@1")
		if schema["additionalProperties"] != false {
			t.Errorf("%s schema: additionalProperties must be false", info.ReceiptType)
		}
		props, _ := schema["properties"].(map[string]any)
		required := map[string]bool{}
		for _, r := range schema["required"].([]any) {
			required[r.(string)] = true
		}
		common := map[string]bool{info.RefField(): true, info.SchemaVersionField(): true, info.AlgorithmField(): true,
			info.DigestField(): true, "destination": true, "consumerName": true, "eventId": true,
			"eventEnvelopeDigestAlgorithmVersion": true, "eventEnvelopeSha256": true, info.TimeField: true}
		var fromSchema []receipt.Member
		for name, p := range props {
			if common[name] {
				continue
			}
			typ, _ := p.(map[string]any)["type"].(string)
			fromSchema = append(fromSchema, receipt.Member{Name: name, JSONType: typ, Required: required[name]})
			// a bound the catalog registers is the schema's too (the schema may bound more)
			if m := byName[name]; m.Minimum != nil {
				if mn, ok := p.(map[string]any)["minimum"].(float64); !ok || int64(mn) != *m.Minimum {
					t.Errorf("%s schema: %s minimum %v, catalog %d", info.ReceiptType, name, p.(map[string]any)["minimum"], *m.Minimum)
				}
			}
		}
		sort.Slice(fromSchema, func(i, j int) bool { return fromSchema[i].Name < fromSchema[j].Name })
		if s, _ := json.Marshal(fromSchema); string(s) != string(got) {
			t.Errorf("%s schema members %s, catalog %s", info.ReceiptType, s, got)
		}
		for name := range common {
			if _, ok := props[name]; !ok || !required[name] {
				t.Errorf("%s schema: common member %s must be a required property", info.ReceiptType, name)
			}
		}
	}
}
