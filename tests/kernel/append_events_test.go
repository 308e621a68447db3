package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// hotCase is a canonical text that is not acceptable on the hot path: the document itself is
// not canonicalizable (slowRefused: the slow path refuses it too, OB201), or only its text is
// not the RFC 8785 form (the slow path accepts the document and canonicalizes it).
type hotCase struct {
	name        string
	edit        func(canonical string) string
	slowRefused bool
}

// hotCases edit the canonical text of a valid envelope whose payload is
// {"a":1,"m":"A","n":1}.
var hotCases = []hotCase{
	{"float 1.5", func(c string) string { return strings.Replace(c, `"n":1}`, `"n":1.5}`, 1) }, true},
	{"integer 2^60", func(c string) string { return strings.Replace(c, `"n":1}`, `"n":1152921504606846976}`, 1) }, true},
	{"integer 2^53", func(c string) string { return strings.Replace(c, `"n":1}`, `"n":9007199254740992}`, 1) }, true},
	{"5000 levels of nesting", func(c string) string {
		return strings.Replace(c, `"n":1}`, `"n":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`, 1)
	}, true},
	{"65 levels of nesting", func(c string) string {
		return strings.Replace(c, `"n":1}`, `"n":`+strings.Repeat("[", 63)+strings.Repeat("]", 63)+`}`, 1)
	}, true},
	{"duplicate key", func(c string) string { return strings.Replace(c, `{"a":1,`, `{"a":1,"a":1,`, 1) }, true},
	{"duplicate key, other value", func(c string) string { return strings.Replace(c, `{"a":1,`, `{"a":0,"a":1,`, 1) }, true},
	{"extra whitespace", func(c string) string { return strings.Replace(c, `"payload":{`, `"payload": {`, 1) }, false},
	{"trailing newline", func(c string) string { return c + "\n" }, false},
	{"escaped letter", func(c string) string { return strings.Replace(c, `"m":"A"`, `"m":"\u0041"`, 1) }, false},
	{"escaped slash", func(c string) string { return strings.Replace(c, `"m":"A"`, `"m":"A\/"`, 1) }, false},
	{"upper-case hex escape", func(c string) string { return strings.Replace(c, `"m":"A"`, `"m":"A\u001F"`, 1) }, false},
	{"number 1.0", func(c string) string { return strings.Replace(c, `"n":1}`, `"n":1.0}`, 1) }, false},
	{"number 1e2", func(c string) string { return strings.Replace(c, `"n":1}`, `"n":1e2}`, 1) }, false},
	{"number -0", func(c string) string { return strings.Replace(c, `"a":1,`, `"a":-0,`, 1) }, false},
	{"members out of order", func(c string) string { return strings.Replace(c, `{"a":1,"m":"A","n":1}`, `{"m":"A","a":1,"n":1}`, 1) }, false},
	{"top-level members out of order", func(c string) string {
		return strings.Replace(c, `{"aggregateId":"run-hot","aggregateRevision":1,`, `{"aggregateRevision":1,"aggregateId":"run-hot",`, 1)
	}, false},
}

// hotEnvelope is a valid envelope (a fresh eventId) whose payload the hot cases edit, and its
// canonical text.
func hotEnvelope(t *testing.T) (map[string]any, string) {
	t.Helper()
	env := testfix.Envelope("execution.run-finalization.closed@1", "1", "run-hot", 1)
	env["payload"] = map[string]any{"a": 1, "m": "A", "n": 1}
	raw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return env, string(c)
}

// D-2 "the hot path accepts exactly what the slow path accepts": every non-canonical text is
// refused with OB201 by append_event and append_events on the hot path (with the text as the
// event itself, and with a different event text); documents the slow path refuses are OB201 on
// the slow path too, while a document whose only fault was its text form is accepted by the slow
// path with the digest of its canonical form. Nothing refused is written.
func TestAppendHotPathRefusesWhatSlowPathRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	for _, hc := range hotCases {
		t.Run(hc.name, func(t *testing.T) {
			_, c := hotEnvelope(t)
			bad := hc.edit(c)
			if bad == c {
				t.Fatal("the edit changed nothing")
			}
			sum := jcsSHA([]byte(bad))
			biUnchanged(t, b.admin, func() {
				// The text is the event (what the producer library sends).
				_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(bad), CanonicalText: &bad, EnvelopeSHA256: &sum})
				biWantState(t, err, "OB201")
				// The event is another text of the same document.
				_, err = pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage("{ " + bad[1:]), CanonicalText: &bad, EnvelopeSHA256: &sum})
				biWantState(t, err, "OB201")
				// append_events, alone and after a valid element.
				_, err = pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: json.RawMessage("[" + bad + "]"),
					CanonicalTexts: []*string{&bad}, EnvelopeSHA256s: []*string{&sum}})
				biWantState(t, err, "OB201")
				_, good := hotEnvelope(t)
				goodSum := jcsSHA([]byte(good))
				_, err = pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: json.RawMessage("[" + good + "," + bad + "]"),
					CanonicalTexts: []*string{&good, &bad}, EnvelopeSHA256s: []*string{&goodSum, &sum}})
				biWantState(t, err, "OB201")
				if err != nil && !strings.Contains(err.Error(), "events[1]") {
					t.Errorf("error does not name the element: %v", err)
				}
				// The Go canonicalizer refuses the document, or canonicalizes it to another text.
				if gc, err := canon.Canonicalize([]byte(bad)); err == nil && string(gc) == bad {
					t.Errorf("Go accepts %q as canonical", bad)
				}
			})
			// The slow path: the same document without a canonical text.
			if hc.slowRefused {
				biUnchanged(t, b.admin, func() {
					_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(bad)})
					biWantState(t, err, "OB201")
					_, err = pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: json.RawMessage("[" + bad + "]")})
					biWantState(t, err, "OB201")
				})
				return
			}
			r, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(bad)})
			if err != nil {
				t.Fatalf("slow path refuses a document whose only fault was its text form: %v", err)
			}
			want, err := canon.SHA256Hex([]byte(bad))
			if err != nil || r.EnvelopeSHA256 != want {
				t.Fatalf("slow path digest %s, Go digest of the document %s (%v)", r.EnvelopeSHA256, want, err)
			}
		})
	}
	// The valid text itself is accepted on the hot path, as the event and beside another event text.
	_, c := hotEnvelope(t)
	sum := jcsSHA([]byte(c))
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(c), CanonicalText: &c, EnvelopeSHA256: &sum}); err != nil {
		t.Fatal(err)
	}
	env, c2 := hotEnvelope(t)
	raw, _ := json.Marshal(env)
	sum2 := jcsSHA([]byte(c2))
	if _, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: raw, CanonicalText: &c2, EnvelopeSHA256: &sum2}); err != nil {
		t.Fatal(err)
	}
}

// D-2: a duplicate key in the submitted event (whose jsonb drops it) is OB201 on the hot path as
// on the slow path, even when the canonical text itself is clean.
func TestAppendHotPathDuplicateKeyInEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	_, c := hotEnvelope(t)
	sum := jcsSHA([]byte(c))
	dup := strings.Replace(c, `{"a":1,`, `{"a":0,"a":1,`, 1)
	biUnchanged(t, b.admin, func() {
		_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(dup), CanonicalText: &c, EnvelopeSHA256: &sum})
		biWantState(t, err, "OB201")
		_, err = pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(dup)})
		biWantState(t, err, "OB201")
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// R-AK-9, R-AP-3, R-AP-4: append_events appends every element, in input order, each with its own
// digest, frozen quartet and one pending delivery per mandatory member; the library's hot path
// and the database's own canonicalization (slow path, also mixed per element) agree; channel
// outbox_delivery is notified once per destination per call, on COMMIT.
func TestAppendEventsAppendsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	listener := testdb.Conn(t, b.dsn, "")
	if _, err := listener.Exec(ctx, "LISTEN "+pgcall.DeliveryChannel); err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{
		{"billing.finalization-reconciliation-resolution.applied@1", "1"}, // core_operations + billing_finalization_coordinator
		{"execution.run-finalization.closed@1", "1"},                      // billing_finalization_coordinator
		{"run.created@2.0", "2.0"},                                        // core_operations
		{"metering.settlement-input.current-changed@1", "1"},              // billing_settlement_catch_up
		{"execution.run-finalization.closed@1", "1"},
	}
	wantCounts := []int{2, 1, 1, 1, 1}
	var evs []producer.Event
	for i, p := range pairs {
		evs = append(evs, producer.Event{
			EventType: p[0], EventSchemaVersion: p[1], AggregateID: fmt.Sprintf("agg-%d", i), AggregateRevision: int64(i + 1),
			Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "t-1", WorkspaceID: "w-1"},
			CorrelationID: fmt.Sprintf("c-%d", i), CausationID: fmt.Sprintf("k-%d", i), OperationID: fmt.Sprintf("o-%d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"note":"Ω \"q\" \\ \n","z":[1,{"b":2,"a":1}]}`, i)),
		})
	}
	tx, err := b.producer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := producer.AppendMany(ctx, tx, evs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit (deferred delivery-set checks): %v", err)
	}
	if len(rs) != len(evs) {
		t.Fatalf("%d results for %d events", len(rs), len(evs))
	}
	for i, r := range rs {
		doc, _, _ := producer.Envelope(evs[i])
		var id struct {
			EventID string `json:"eventId"`
		}
		_ = json.Unmarshal(doc, &id)
		if r.DeliveryCount != wantCounts[i] {
			t.Errorf("event %d: %d deliveries, want %d", i, r.DeliveryCount, wantCounts[i])
		}
		var stored, canonical, aggregate string
		var deliveries int
		if err := b.admin.QueryRow(ctx, `SELECT e.event_envelope_sha256, e.event_envelope_canonical, e.aggregate_id,
			(SELECT count(*) FROM outbox.outbox_deliveries d WHERE d.event_id = e.event_id AND d.status = 'pending')
			FROM outbox.outbox_events e WHERE e.event_id = $1`, r.EventID).Scan(&stored, &canonical, &aggregate, &deliveries); err != nil {
			t.Fatalf("event %d (%s): %v", i, r.EventID, err)
		}
		if aggregate != fmt.Sprintf("agg-%d", i) || stored != r.EnvelopeSHA256 || jcsSHA([]byte(canonical)) != stored || deliveries != wantCounts[i] {
			t.Errorf("event %d stored %s/%s/%s with %d deliveries, returned %+v", i, aggregate, stored, canonical, deliveries, r)
		}
	}
	if n := countRows(t, b.admin, `SELECT count(*) FROM outbox.verify_event_digests(100)`); n != 0 {
		t.Fatalf("verify_event_digests reported %d problems", n)
	}
	// One notification per destination of the call (3 destinations), none twice.
	got := map[string]int{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		got[n.Payload]++
	}
	want := map[string]int{"core_operations": 1, "billing_finalization_coordinator": 1, "billing_settlement_catch_up": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notifications %v, want %v", got, want)
	}

	// The database's own canonicalization, and a mixed call (hot and slow elements).
	e1 := testfix.Envelope("run.created@2.0", "2.0", "agg-slow", 1)
	e2 := testfix.Envelope("execution.run-finalization.closed@1", "1", "agg-hot", 1)
	delete(e1, "eventId")
	delete(e1, "occurredAt") // generated on the slow path
	raw2 := mustMarshal(t, e2)
	c2, _ := canon.Canonicalize(raw2)
	t2, s2 := string(c2), jcsSHA(c2)
	events := json.RawMessage("[" + string(mustMarshal(t, e1)) + ",\n " + string(raw2) + "]")
	mixed, err := pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: events,
		CanonicalTexts: []*string{nil, &t2}, EnvelopeSHA256s: []*string{nil, &s2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mixed) != 2 || mixed[1].EventID != e2["eventId"] || mixed[1].EnvelopeSHA256 != s2 || len(mixed[0].EventID) != 36 {
		t.Fatalf("mixed call returned %+v", mixed)
	}
	var canonical string
	if err := b.admin.QueryRow(ctx, `SELECT event_envelope_canonical FROM outbox.outbox_events WHERE event_id = $1`, mixed[0].EventID).Scan(&canonical); err != nil {
		t.Fatal(err)
	}
	if sum, err := canon.SHA256Hex([]byte(canonical)); err != nil || sum != mixed[0].EnvelopeSHA256 || !strings.Contains(canonical, mixed[0].EventID) {
		t.Fatalf("generated envelope %s digest %s (%v), returned %+v", canonical, sum, err, mixed[0])
	}
	// An empty array appends nothing and returns nothing.
	if rs, err := pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: json.RawMessage(`[]`)}); err != nil || len(rs) != 0 {
		t.Fatalf("empty call: %v %v", rs, err)
	}
}

// R-AK-9: one invalid element fails the whole call with append_event's SQLSTATE for it, names
// the element, and nothing of the call is appended.
func TestAppendEventsInvalidElementAppendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	valid := func() map[string]any {
		return testfix.Envelope("execution.run-finalization.closed@1", "1", "agg-batch", 1)
	}
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		state string
	}{
		{"unknown field", func(m map[string]any) { m["priority"] = "high" }, "OB105"},
		{"missing refinement", func(m map[string]any) {
			m["eventType"] = "run.created@2.0"
			m["eventSchemaVersion"] = "2.0"
			delete(m, "operationId")
		}, "OB105"},
		{"float in payload", func(m map[string]any) { m["payload"] = map[string]any{"x": 1.5} }, "OB201"},
		{"unsafe integer", func(m map[string]any) { m["payload"] = map[string]any{"n": json.Number("9007199254740993")} }, "OB201"},
		{"pair not applicable", func(m map[string]any) { m["eventSchemaVersion"] = "9" }, "OB103"},
		{"impossible time", func(m map[string]any) { m["occurredAt"] = "2026-02-29T10:00:00.000000Z" }, "OB105"},
	}
	for _, c := range cases {
		for _, hot := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s hot=%v", c.name, hot), func(t *testing.T) {
				bad := valid()
				c.edit(bad)
				docs := [][]byte{mustMarshal(t, valid()), mustMarshal(t, bad), mustMarshal(t, valid())}
				p := pgcall.AppendEventsParams{Events: json.RawMessage("[" + string(docs[0]) + "," + string(docs[1]) + "," + string(docs[2]) + "]")}
				if hot {
					for _, d := range docs {
						text := string(d)
						if cd, err := canon.Canonicalize(d); err == nil {
							text = string(cd)
						}
						sum := jcsSHA([]byte(text))
						p.CanonicalTexts = append(p.CanonicalTexts, &text)
						p.EnvelopeSHA256s = append(p.EnvelopeSHA256s, &sum)
					}
				}
				biUnchanged(t, b.admin, func() {
					_, err := pgcall.AppendEvents(ctx, b.producer, p)
					biWantState(t, err, c.state)
					if !strings.Contains(err.Error(), "events[1]") {
						t.Errorf("error does not name element 1: %v", err)
					}
				})
				// append_event says the same about the element alone.
				_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: docs[1]})
				biWantState(t, err, c.state)
			})
		}
	}
	// Call shape: NULL, not an array, arrays of the wrong length, one array without the other.
	one := mustMarshal(t, valid())
	text := string(one)
	for name, p := range map[string]pgcall.AppendEventsParams{
		"not an array":     {Events: one},
		"texts too short":  {Events: json.RawMessage("[" + text + "," + text + "]"), CanonicalTexts: []*string{&text}, EnvelopeSHA256s: []*string{&text}},
		"texts without sh": {Events: json.RawMessage("[" + text + "]"), CanonicalTexts: []*string{&text}},
		"null element":     {Events: json.RawMessage(`[null]`)},
	} {
		t.Run(name, func(t *testing.T) {
			biUnchanged(t, b.admin, func() {
				_, err := pgcall.AppendEvents(ctx, b.producer, p)
				biWantState(t, err, "OB105")
			})
		})
	}
	if _, err := b.producer.Exec(ctx, `SELECT outbox.append_events(NULL)`); pgcall.SQLState(err) != "OB105" {
		t.Fatalf("NULL events: %v", err)
	}
}

// R-AK-9, T-4: re-appending a call is idempotent (same rows back, nothing new written); an
// eventId repeated within a call is appended once; the same eventId with another envelope, in a
// later call or within the call, is OB105.
func TestAppendEventsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	evs := []producer.Event{sampleEvent(), sampleEvent(), sampleEvent()}
	for i := range evs {
		evs[i].EventID = testfix.NewUUID()
		evs[i].OccurredAt = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
		evs[i].AggregateRevision = int64(i + 1)
	}
	first, err := producer.AppendMany(ctx, b.producer, evs)
	if err != nil {
		t.Fatal(err)
	}
	e0, d0 := totalEventsAndDeliveries(t, b.admin)
	again, err := producer.AppendMany(ctx, b.producer, evs)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("re-append returned %+v, first %+v", again, first)
	}
	// Within one call: the same event twice, plus a new one.
	fresh := sampleEvent()
	fresh.EventID = testfix.NewUUID()
	fresh.OccurredAt = evs[0].OccurredAt
	rs, err := producer.AppendMany(ctx, b.producer, []producer.Event{fresh, evs[1], fresh})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0] != rs[2] || rs[1] != first[1] || rs[0].DeliveryCount != 1 {
		t.Fatalf("repeated event returned %+v", rs)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != e0+1 || d != d0+1 {
		t.Fatalf("%d events, %d deliveries, want %d/%d", e, d, e0+1, d0+1)
	}
	// The same eventId with another envelope.
	changed := evs[2]
	changed.Payload = json.RawMessage(`{"changed":true}`)
	biUnchanged(t, b.admin, func() {
		_, err := producer.AppendMany(ctx, b.producer, []producer.Event{evs[0], changed})
		if !errors.Is(err, producer.ErrEnvelopeInvalid) {
			t.Fatalf("same id, other envelope: %v, want OB105", err)
		}
		other := sampleEvent()
		other.EventID, other.OccurredAt = testfix.NewUUID(), evs[0].OccurredAt
		twin := other
		twin.AggregateRevision = 9
		_, err = producer.AppendMany(ctx, b.producer, []producer.Event{other, twin})
		if !errors.Is(err, producer.ErrEnvelopeInvalid) {
			t.Fatalf("same id twice in a call, other envelope: %v, want OB105", err)
		}
	})
	// append_event agrees with append_events about an event appended by the other.
	doc, _, _ := producer.Envelope(evs[0])
	r, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: doc})
	if err != nil || r.EventID != first[0].EventID || r.EnvelopeSHA256 != first[0].EnvelopeSHA256 || r.DeliveryCount != first[0].DeliveryCount {
		t.Fatalf("append_event after append_events: %+v %v, want %+v", r, err, first[0])
	}
}

// R-SEC-1, R-AK-9: append_events is executable by outbox_producer only (42501 for every other
// kernel role and for PUBLIC), and is SECURITY DEFINER with a pinned search_path.
func TestAppendEventsGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	var secdef bool
	var config string
	if err := b.admin.QueryRow(ctx, `SELECT prosecdef, array_to_string(proconfig, ';') FROM pg_proc
		WHERE oid = 'outbox.append_events(json,text[],text[],text,text)'::regprocedure`).Scan(&secdef, &config); err != nil {
		t.Fatal(err)
	}
	// enable_seqscan and jit off, generic plans: SPEC §12a HP-3, HP-4 (the function's header)
	if !secdef || config != "search_path=pg_catalog, pg_temp;enable_seqscan=off;jit=off;plan_cache_mode=force_generic_plan" {
		t.Fatalf("append_events: secdef=%v config=%q", secdef, config)
	}
	doc := mustMarshal(t, testfix.Envelope("execution.run-finalization.closed@1", "1", "agg-grant", 1))
	events := json.RawMessage("[" + string(doc) + "]")
	var roles []string
	for _, r := range pgcall.KernelRoles {
		if r != "outbox_producer" && r != "outbox_owner" {
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	if _, err := b.admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE outbox_test_nobody NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, role := range append(roles, "outbox_test_nobody") {
		conn := testdb.Conn(t, b.dsn, role)
		biUnchanged(t, b.admin, func() {
			_, err := pgcall.AppendEvents(ctx, conn, pgcall.AppendEventsParams{Events: events})
			if !errors.Is(err, pgcall.ErrPermissionDenied) {
				t.Errorf("%s: %v, want 42501", role, err)
			}
		})
	}
	// The private rule functions are the owner's alone, even for the producer.
	for _, sql := range []string{`SELECT outbox._append_validate('{}', NULL, NULL, 1, '')`,
		`SELECT outbox._append_fail('OB105', 'x', NULL, NULL)`, `SELECT outbox._jcs_text_problem('{}')`} {
		if _, err := b.producer.Exec(ctx, sql); pgcall.SQLState(err) != "42501" {
			t.Errorf("producer %s: %v, want 42501", sql, err)
		}
	}
	if rs, err := pgcall.AppendEvents(ctx, b.producer, pgcall.AppendEventsParams{Events: events}); err != nil || len(rs) != 1 {
		t.Fatalf("producer: %v %v", rs, err)
	}
}

// R-AP-5: the deferred anti-join still proves every event's delivery set when the events came
// from append_events: a delivery removed from the set (as the owner, in the same transaction)
// makes COMMIT fail with OB104 and nothing of the transaction stays.
func TestAppendEventsDeferredAntiJoin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE outbox_producer"); err != nil {
		t.Fatal(err)
	}
	evs := []producer.Event{sampleEvent(), sampleEvent()}
	evs[1].EventType, evs[1].EventSchemaVersion = "billing.finalization-reconciliation-resolution.applied@1", "1"
	rs, err := producer.AppendMany(ctx, tx, evs)
	if err != nil {
		t.Fatal(err)
	}
	// A superuser (the owner could not either) adds a delivery that is not a member of the
	// event's frozen set, in the same transaction.
	if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
		expected_receipt_type, expected_receipt_schema_version, mandatory, aggregate_id, aggregate_revision)
		VALUES ('metering_input_processor', $1, 1, 'metering_input_processor_consumer',
		'MeteringInputProcessorConsumerReceipt', 1, true, 'wallet-7', 1)`, rs[1].EventID); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx)
	if !errors.Is(pgcallErr(err), pgcall.ErrDeliverySetIncomplete) {
		t.Fatalf("commit: %v, want OB104", err)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != 0 || d != 0 {
		t.Fatalf("%d events, %d deliveries after the failed commit", e, d)
	}
}
