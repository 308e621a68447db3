package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

type appendBundle struct {
	dsn      string
	admin    *pgx.Conn // superuser, for assertions
	producer *pgx.Conn // SET ROLE outbox_producer
	quartet  pgcall.Quartet
}

func appendSetup(t *testing.T) appendBundle {
	t.Helper()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	q := testfix.ActivateReference(t, admin)
	return appendBundle{dsn: dsn, admin: admin, producer: testdb.Conn(t, dsn, "outbox_producer"), quartet: q}
}

func appendJSON(ctx context.Context, db pgcall.DBTX, env any) (pgcall.AppendResult, error) {
	b, err := json.Marshal(env)
	if err != nil {
		return pgcall.AppendResult{}, err
	}
	return pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: b})
}

func countRows(t *testing.T, db pgcall.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func totalEventsAndDeliveries(t *testing.T, db pgcall.DBTX) (int, int) {
	return countRows(t, db, `SELECT count(*) FROM outbox.outbox_events`),
		countRows(t, db, `SELECT count(*) FROM outbox.outbox_deliveries`)
}

// R-AP-1, R-AP-2, R-AP-3, R-AP-4: one event, frozen quartet, the database's own digest, one
// pending delivery per mandatory member with the member's receipt and projection target.
func TestAppendEventCreatesFrozenDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	env := testfix.Envelope("billing.finalization-reconciliation-resolution.applied@1", "1", "agg-1", 1)
	r, err := appendJSON(ctx, b.producer, env)
	if err != nil {
		t.Fatal(err)
	}
	if r.EventID != env["eventId"] || r.DeliveryCount != 2 {
		t.Fatalf("append returned %+v", r)
	}
	raw, _ := json.Marshal(env)
	want, err := canon.SHA256Hex(raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.EnvelopeSHA256 != want {
		t.Fatalf("database digest %s, Go digest %s", r.EnvelopeSHA256, want)
	}
	var q pgcall.Quartet
	var recomputed string
	if err := b.admin.QueryRow(ctx, `SELECT delivery_set_version, delivery_set_definition_schema_version,
		delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
		outbox.jcs_sha256(outbox._event_envelope(e)::json)
		FROM outbox.outbox_events e WHERE event_id = $1`, r.EventID).Scan(&q.DeliverySetVersion,
		&q.DefinitionSchemaVersion, &q.DigestAlgorithmVersion, &q.DefinitionDigest, &recomputed); err != nil {
		t.Fatal(err)
	}
	if q != b.quartet {
		t.Fatalf("frozen quartet %+v, active %+v", q, b.quartet)
	}
	if recomputed != want {
		t.Fatalf("digest not recomputable from stored columns: %s vs %s", recomputed, want) // D-3
	}
	rows, err := b.admin.Query(ctx, `SELECT destination, consumer_name, expected_receipt_type, expected_receipt_schema_version,
		coalesce(required_projection_name, ''), coalesce(required_projection_version, 0), status, attempt_count
		FROM outbox.outbox_deliveries WHERE event_id = $1 ORDER BY destination`, r.EventID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var d, c, rt, pn, st string
		var rv, pv, ac int
		if err := rows.Scan(&d, &c, &rt, &rv, &pn, &pv, &st, &ac); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s@%d %s@%d %s %d", d, c, rt, rv, pn, pv, st, ac))
	}
	wantRows := []string{
		"billing_finalization_coordinator billing_finalization_coordinator_consumer BillingFinalizationCoordinatorConsumerReceipt@1 @0 pending 0",
		"core_operations operations_projector OperationsProjectionAppliedReceipt@1 operations_timeline@1 pending 0",
	}
	if strings.Join(got, "\n") != strings.Join(wantRows, "\n") {
		t.Fatalf("deliveries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}
}

// R-AP-1: a pair that is not applicable, or no active definition, fails the append (OB103)
// and the business transaction writes nothing.
func TestAppendEventNotApplicable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("unknown pair", func(t *testing.T) {
		t.Parallel()
		b := appendSetup(t)
		for _, pair := range [][2]string{{"run.created@2.0", "1"}, {"run.created", "2.0"}, {"run.created@2.0", "2"}, {"no.such.event@1", "1"}} {
			_, err := appendJSON(ctx, b.producer, testfix.Envelope(pair[0], pair[1], "agg", 1))
			if !errors.Is(err, pgcall.ErrNotApplicable) {
				t.Errorf("%v: got %v, want OB103", pair, err)
			}
		}
		if e, d := totalEventsAndDeliveries(t, b.admin); e != 0 || d != 0 {
			t.Fatalf("%d events, %d deliveries after rejections", e, d)
		}
	})
	t.Run("no active definition", func(t *testing.T) {
		t.Parallel()
		dsn := testdb.URL(t)
		_, err := appendJSON(ctx, testdb.Conn(t, dsn, "outbox_producer"), testfix.Envelope("run.created@2.0", "2.0", "agg", 1))
		if !errors.Is(err, pgcall.ErrNotApplicable) {
			t.Fatalf("got %v, want OB103", err)
		}
	})
}

// R-AP-7, D-3: envelope rules, each refused with OB105 (or OB201 for non-canonicalizable
// input), and nothing is written.
func TestAppendEventEnvelopeRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	base := func() map[string]any { return testfix.Envelope("run.created@2.0", "2.0", "run-1", 1) }
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		state string
	}{
		{"run.created@2.0 without operationId", func(m map[string]any) { delete(m, "operationId") }, "OB105"},
		{"run.created@2.0 without correlationId", func(m map[string]any) { delete(m, "correlationId") }, "OB105"},
		{"unknown field", func(m map[string]any) { m["priority"] = "high" }, "OB105"},
		{"unknown tenant field", func(m map[string]any) { m["tenant"].(map[string]any)["region"] = "eu" }, "OB105"},
		{"missing tenantId", func(m map[string]any) { delete(m["tenant"].(map[string]any), "tenantId") }, "OB105"},
		{"null optional field", func(m map[string]any) { m["causationId"] = nil }, "OB105"},
		{"missing aggregateId", func(m map[string]any) { delete(m, "aggregateId") }, "OB105"},
		{"revision zero", func(m map[string]any) { m["aggregateRevision"] = 0 }, "OB105"},
		{"revision as string", func(m map[string]any) { m["aggregateRevision"] = "1" }, "OB105"},
		{"occurredAt with offset", func(m map[string]any) { m["occurredAt"] = "2026-01-01T10:00:00.000000+01:00" }, "OB105"},
		{"occurredAt with three digits", func(m map[string]any) { m["occurredAt"] = "2026-01-01T10:00:00.000Z" }, "OB105"},
		{"occurredAt impossible date", func(m map[string]any) { m["occurredAt"] = "2026-02-30T10:00:00.000000Z" }, "OB105"},
		{"upper-case eventId", func(m map[string]any) { m["eventId"] = strings.ToUpper(m["eventId"].(string)) }, "OB105"},
		{"eventId not a uuid", func(m map[string]any) { m["eventId"] = "evt-1" }, "OB105"},
		{"payload not an object", func(m map[string]any) { m["payload"] = []any{1, 2} }, "OB105"},
		{"float in payload", func(m map[string]any) { m["payload"] = map[string]any{"amount": 10.5} }, "OB201"},
		{"unsafe integer in payload", func(m map[string]any) { m["payload"] = map[string]any{"n": json.Number("9007199254740992")} }, "OB201"},
	}
	for _, c := range cases {
		env := base()
		c.edit(env)
		_, err := appendJSON(ctx, b.producer, env)
		if got := pgcall.SQLState(err); got != c.state {
			t.Errorf("%s: got %v (%s), want %s", c.name, err, got, c.state)
		}
	}
	// wallet.reserved@2.0 needs causationId as well.
	w := testfix.Envelope("wallet.reserved@2.0", "2.0", "wallet-1", 1)
	delete(w, "causationId")
	if _, err := appendJSON(ctx, b.producer, w); pgcall.SQLState(err) != "OB105" {
		t.Errorf("wallet.reserved@2.0 without causationId: %v", err)
	} else {
		// Issue 12 defect 4: the detail names the pair once, not "wallet.reserved@2.0@2.0".
		var ke *pgcall.Error
		if !errors.As(err, &ke) || ke.PgErr.Detail != "wallet.reserved@2.0 (schema 2.0) requires causationId" {
			t.Errorf("OB105 detail: %v", err)
		}
	}
	// Duplicate keys cannot hide in the json text (the API takes json, not jsonb).
	raw, _ := json.Marshal(base())
	dup := `{"aggregateId":"other",` + string(raw[1:])
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(dup)}); pgcall.SQLState(err) != "OB201" {
		t.Errorf("duplicate key: %v, want OB201", err)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != 0 || d != 0 {
		t.Fatalf("%d events, %d deliveries after rejections", e, d)
	}
	// The valid base envelope is accepted (the cases above fail for their own reason only).
	if _, err := appendJSON(ctx, b.producer, base()); err != nil {
		t.Fatal(err)
	}
}

// Payloads above the configured limit are refused with OB105 (issue: size limit).
func TestAppendEventPayloadLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	// A producer cannot raise its own limit: the setting lives in an owner-only table.
	if _, err := b.producer.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 1 << 30`); pgcall.SQLState(err) != "42501" {
		t.Fatalf("producer changing the limit: %v, want 42501", err)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE outbox.kernel_settings SET value = 2048 WHERE name = 'max_payload_bytes'`); err != nil {
		t.Fatal(err)
	}
	env := testfix.Envelope("billing.finalization.committed@1", "1", "agg", 1)
	env["payload"] = map[string]any{"blob": strings.Repeat("x", 4096)}
	if _, err := appendJSON(ctx, b.producer, env); !errors.Is(err, pgcall.ErrEnvelopeInvalid) {
		t.Fatalf("oversized payload: %v, want OB105", err)
	}
	env["payload"] = map[string]any{"blob": strings.Repeat("x", 1024)}
	if _, err := appendJSON(ctx, b.producer, env); err != nil {
		t.Fatalf("payload under the limit: %v", err)
	}
}

// D-2, R-AP-3: the hot path stores the caller's digest only after verifying it; a digest that
// differs, or canonical text that is not the submitted envelope, is OB105.
func TestAppendEventHotPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	env := testfix.Envelope("execution.run-finalization.closed@1", "1", "run-9", 3)
	raw, _ := json.Marshal(env)
	c, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := canon.SHA256Hex(c)
	text := string(c)
	wrong := kernelfix.Zeros64
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: raw, CanonicalText: &text, EnvelopeSHA256: &wrong}); !errors.Is(err, pgcall.ErrEnvelopeInvalid) {
		t.Fatalf("wrong digest: %v, want OB105", err)
	}
	other := testfix.Envelope("execution.run-finalization.closed@1", "1", "run-9", 4)
	otherRaw, _ := json.Marshal(other)
	oc, _ := canon.Canonicalize(otherRaw)
	od, _ := canon.SHA256Hex(oc)
	otext := string(oc)
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: raw, CanonicalText: &otext, EnvelopeSHA256: &od}); !errors.Is(err, pgcall.ErrEnvelopeInvalid) {
		t.Fatalf("canonical text of another envelope: %v, want OB105", err)
	}
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: raw, CanonicalText: &text}); !errors.Is(err, pgcall.ErrEnvelopeInvalid) {
		t.Fatalf("text without digest: %v, want OB105", err)
	}
	r, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: raw, CanonicalText: &text, EnvelopeSHA256: &d})
	if err != nil {
		t.Fatal(err)
	}
	if r.EnvelopeSHA256 != d || r.DeliveryCount != 1 {
		t.Fatalf("hot path append returned %+v", r)
	}
	// The audit sweep reproduces the digest with the database's own canonicalizer.
	aud := testdb.Conn(t, b.dsn, "outbox_auditor")
	if n := countRows(t, aud, `SELECT count(*) FROM outbox.verify_event_digests(100)`); n != 0 {
		t.Fatalf("verify_event_digests reported %d problems", n)
	}
}

// Re-appending the same event (same id, same digest) is idempotent; the same id with other
// content is refused (T-4 duplicate event, same id different hash).
func TestAppendEventSameIDTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	env := testfix.Envelope("billing.case-resolution.applied@1", "1", "case-1", 1)
	r1, err := appendJSON(ctx, b.producer, env)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := appendJSON(ctx, b.producer, env)
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 {
		t.Fatalf("re-append returned %+v, first %+v", r2, r1)
	}
	env["payload"] = map[string]any{"changed": true}
	if _, err := appendJSON(ctx, b.producer, env); !errors.Is(err, pgcall.ErrEnvelopeInvalid) {
		t.Fatalf("same id, different digest: %v, want OB105", err)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != 1 || d != 1 {
		t.Fatalf("%d events, %d deliveries, want 1/1", e, d)
	}
}

// R-AP-5: a business transaction whose later statement fails leaves no event and no delivery.
func TestAppendEventRolledBackWithBusinessTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	tx, err := b.producer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendJSON(ctx, tx, testfix.Envelope("run.created@2.0", "2.0", "run-1", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1/0`); err == nil {
		t.Fatal("expected the business statement to fail")
	}
	_ = tx.Rollback(ctx)
	if e, d := totalEventsAndDeliveries(t, b.admin); e != 0 || d != 0 {
		t.Fatalf("%d events, %d deliveries survived the rollback", e, d)
	}
}

// R-AP-5: a delivery row that is missing or extra is caught at COMMIT (OB104), even when the
// owner writes the tables directly.
func TestAppendEventDeferredAntiJoin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	owner := testdb.Conn(t, b.dsn, "outbox_owner")
	committed, err := appendJSON(ctx, b.producer, testfix.Envelope("run.created@2.0", "2.0", "run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	commitErr := func(stmts ...string) error {
		tx, err := owner.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	}
	// Extra delivery for a committed event (a destination that is not a member of its pair).
	extra := fmt.Sprintf(`INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
		expected_receipt_type, expected_receipt_schema_version, mandatory, aggregate_id, aggregate_revision)
		VALUES ('metering_input_processor', '%s', 1, 'metering_input_processor_consumer',
		'MeteringInputProcessorConsumerReceipt', 1, true, 'run-1', 1)`, committed.EventID)
	if err := commitErr(extra); !errors.Is(pgcallErr(err), pgcall.ErrDeliverySetIncomplete) {
		t.Fatalf("extra delivery: %v, want OB104", err)
	}
	// An event inserted without its deliveries.
	missing := fmt.Sprintf(`INSERT INTO outbox.outbox_events (event_id, event_type, schema_version, delivery_set_version,
		delivery_set_definition_schema_version, delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
		aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, event_payload,
		event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at)
		VALUES ('%s', 'run.created@2.0', '2.0', 1, 1, 'jcs-sha256-v1', '%s', 'run-2', 1, 'k', 't', 'w', '{}',
		'jcs-sha256-v1', '%s', now())`, testfix.NewUUID(), b.quartet.DefinitionDigest, kernelfix.Zeros64)
	if err := commitErr(missing); !errors.Is(pgcallErr(err), pgcall.ErrDeliverySetIncomplete) {
		t.Fatalf("missing delivery: %v, want OB104", err)
	}
	// An event with a delivery whose frozen projection target differs from the member's.
	wrongID := testfix.NewUUID()
	wrongEvent := strings.Replace(missing, "VALUES ('", "VALUES ('"+wrongID+"', '", 1)
	wrongEvent = strings.Replace(wrongEvent, "'"+wrongID+"', '"+wrongEvent[strings.Index(wrongEvent, wrongID)+len(wrongID)+4:][:36]+"', ", "'"+wrongID+"', ", 1)
	wrongDelivery := fmt.Sprintf(`INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
		expected_receipt_type, expected_receipt_schema_version, required_projection_name, required_projection_version,
		mandatory, aggregate_id, aggregate_revision)
		VALUES ('core_operations', '%s', 1, 'operations_projector', 'OperationsProjectionAppliedReceipt', 1,
		'operations_timeline', 2, true, 'run-2', 1)`, wrongID)
	if err := commitErr(wrongEvent, wrongDelivery); !errors.Is(pgcallErr(err), pgcall.ErrDeliverySetIncomplete) {
		t.Fatalf("delivery with another projection target: %v, want OB104", err)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != 1 || d != 1 {
		t.Fatalf("%d events, %d deliveries, want only the committed append (1/1)", e, d)
	}
}

func pgcallErr(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := pgcall.SQLStates[pgcall.SQLState(err)]; ok {
		return fmt.Errorf("%w: %v", s, err)
	}
	return err
}

// R-AP-6: several events in one transaction each get their own row, digest, frozen quartet and
// deliveries.
func TestAppendEventSeveralInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	tx, err := b.producer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{{"run.created@2.0", "2.0"}, {"wallet.reserved@2.0", "2.0"},
		{"billing.finalization-reconciliation-resolution.applied@1", "1"}, {"metering.settlement-input.current-changed@1", "1"}}
	digests := map[string]string{}
	for i, p := range pairs {
		r, err := appendJSON(ctx, tx, testfix.Envelope(p[0], p[1], "agg-shared", int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		digests[r.EventID] = r.EnvelopeSHA256
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(digests) != 4 {
		t.Fatalf("%d distinct events", len(digests))
	}
	seen := map[string]bool{}
	for id, d := range digests {
		if seen[d] {
			t.Fatal("two events share a digest")
		}
		seen[d] = true
		if n := countRows(t, b.admin, `SELECT count(*) FROM outbox.outbox_events WHERE event_id = $1 AND event_envelope_sha256 = $2 AND delivery_set_version = 1`, id, d); n != 1 {
			t.Fatalf("event %s not stored with its digest", id)
		}
	}
	if _, d := totalEventsAndDeliveries(t, b.admin); d != 5 {
		t.Fatalf("%d deliveries, want 5 (1+1+2+1)", d)
	}
}

// R-AP-2, R-DS-5, R-DS-6, T-1: a definition switch racing concurrent appends: every event keeps
// the quartet that was active in its own transaction and exactly that quartet's deliveries; a
// destination added by version 2 affects only events appended under version 2.
func TestAppendEventRacesDefinitionSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	registrar := testdb.Conn(t, b.dsn, "outbox_registrar")
	// Version 2 routes run.created@2.0 to metering_input_processor as well.
	v2doc := kernelfix.MutateRelease(t, func(m map[string]any) {
		m["deliverySetVersion"] = 2
		ms := kernelfix.Members(m)
		ms = append(ms, map[string]any{"eventType": "run.created@2.0", "eventSchemaVersion": "2.0",
			"destination": "metering_input_processor", "consumerName": "metering_input_processor_consumer",
			"expectedReceiptType": "MeteringInputProcessorConsumerReceipt", "expectedReceiptSchemaVersion": 1,
			"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true})
		sortMembers(ms)
		m["members"] = ms
		m["memberCount"] = len(ms)
	})
	q2, err := pgcall.RegisterDeliverySet(ctx, registrar, v2doc, "v2")
	if err != nil {
		t.Fatal(err)
	}
	const producers, perProducer = 4, 25
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, producers+1)
	for p := 0; p < producers; p++ {
		conn := testdb.Conn(t, b.dsn, "outbox_producer")
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			<-start
			for i := 0; i < perProducer; i++ {
				if _, err := appendJSON(ctx, conn, testfix.Envelope("run.created@2.0", "2.0", fmt.Sprintf("run-%d-%d", p, i), 1)); err != nil {
					errs <- err
					return
				}
			}
		}(p)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		for i := 0; i < 6; i++ {
			q := q2
			if i%2 == 1 {
				q = b.quartet
			}
			if err := pgcall.ActivateDeliverySet(ctx, registrar, q); err != nil {
				errs <- err
				return
			}
		}
	}()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every event has exactly the deliveries of its own frozen version.
	bad := countRows(t, b.admin, `SELECT count(*) FROM outbox.outbox_events e
		WHERE (SELECT count(*) FROM outbox.outbox_deliveries d WHERE d.event_id = e.event_id AND d.delivery_set_version = e.delivery_set_version)
		      <> CASE e.delivery_set_version WHEN 1 THEN 1 WHEN 2 THEN 2 END
		   OR EXISTS (SELECT 1 FROM outbox.outbox_deliveries d WHERE d.event_id = e.event_id AND d.delivery_set_version <> e.delivery_set_version)`)
	if bad != 0 {
		t.Fatalf("%d events with deliveries not matching their frozen version", bad)
	}
	if n := countRows(t, b.admin, `SELECT count(*) FROM outbox.outbox_events`); n != producers*perProducer {
		t.Fatalf("%d events, want %d", n, producers*perProducer)
	}
	if n := countRows(t, b.admin, `SELECT count(*) FROM outbox.outbox_deliveries d JOIN outbox.outbox_events e USING (event_id)
		WHERE d.destination = 'metering_input_processor' AND e.delivery_set_version = 1`); n != 0 {
		t.Fatalf("%d version-1 events got the version-2 destination (R-DS-6)", n)
	}
}

func sortMembers(ms []any) {
	key := func(x any) string {
		m := x.(map[string]any)
		return m["eventType"].(string) + "\x00" + m["eventSchemaVersion"].(string) + "\x00" + m["destination"].(string) + "\x00" + m["consumerName"].(string)
	}
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && key(ms[j]) < key(ms[j-1]); j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// R-SEC-3: events and deliveries are immutable for everyone, the owner included; published_at
// cannot be set outside the publication function.
func TestEventsAndDeliveriesImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	r, err := appendJSON(ctx, b.producer, testfix.Envelope("run.created@2.0", "2.0", "run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	owner := testdb.Conn(t, b.dsn, "outbox_owner")
	for _, stmt := range []string{
		`UPDATE outbox.outbox_events SET event_payload = '{"x":1}' WHERE event_id = $1`,
		`UPDATE outbox.outbox_events SET event_envelope_sha256 = repeat('0', 64) WHERE event_id = $1`,
		`UPDATE outbox.outbox_events SET created_at = now() - interval '1 day' WHERE event_id = $1`,
		`UPDATE outbox.outbox_events SET event_envelope_canonical = '{}' WHERE event_id = $1`,
		`INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ($1, now())`,
		`DELETE FROM outbox.outbox_events WHERE event_id = $1`,
		`UPDATE outbox.outbox_deliveries SET consumer_name = 'x' WHERE event_id = $1`,
		`UPDATE outbox.outbox_deliveries SET required_projection_version = 2 WHERE event_id = $1`,
		`DELETE FROM outbox.outbox_deliveries WHERE event_id = $1`,
	} {
		if _, err := owner.Exec(ctx, stmt, r.EventID); pgcall.SQLState(err) != "OB202" {
			t.Errorf("%s: got %v, want OB202", stmt, err)
		}
	}
	for _, stmt := range []string{`TRUNCATE outbox.outbox_events CASCADE`, `TRUNCATE outbox.outbox_deliveries CASCADE`} {
		if _, err := owner.Exec(ctx, stmt); pgcall.SQLState(err) != "OB202" {
			t.Errorf("%s: got %v, want OB202", stmt, err)
		}
	}
	// The producer cannot read or write the tables at all (R-SEC-1).
	for _, stmt := range []string{`SELECT count(*) FROM outbox.outbox_events`,
		`UPDATE outbox.outbox_events SET created_at = now()`, `DELETE FROM outbox.outbox_deliveries`,
		`SELECT count(*) FROM outbox.outbox_publications`} {
		if _, err := b.producer.Exec(ctx, stmt); pgcall.SQLState(err) != "42501" {
			t.Errorf("producer %s: got %v, want 42501", stmt, err)
		}
	}
}

// D-2: the audit sweep finds a stored digest the database does not reproduce.
func TestVerifyEventDigestsFindsTampering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	r, err := appendJSON(ctx, b.producer, testfix.Envelope("run.created@2.0", "2.0", "run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendJSON(ctx, b.producer, testfix.Envelope("run.created@2.0", "2.0", "run-2", 1)); err != nil {
		t.Fatal(err)
	}
	// Simulate corruption below the kernel (a superuser bypassing triggers).
	if _, err := b.admin.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE outbox.outbox_events SET event_payload = '{"tampered":true}' WHERE event_id = $1`, r.EventID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `RESET session_replication_role`); err != nil {
		t.Fatal(err)
	}
	aud := testdb.Conn(t, b.dsn, "outbox_auditor")
	rows, err := aud.Query(ctx, `SELECT event_id::text, problem FROM outbox.verify_event_digests(100)`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id, problem string
		if err := rows.Scan(&id, &problem); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(problem, "digest_mismatch") {
			t.Errorf("problem %q", problem)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != r.EventID {
		t.Fatalf("verify reported %v, want only %s", ids, r.EventID)
	}
}
