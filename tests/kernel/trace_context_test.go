package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

const (
	tcParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tcState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// tcGolden is the published envelope golden: its canonical text and digest.
func tcGolden(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(testfix.ContractsDir, "golden", "event-envelope.run-created")
	c, err := os.ReadFile(filepath.Join(dir, "canonical.json"))
	if err != nil {
		t.Fatal(err)
	}
	sha, err := os.ReadFile(filepath.Join(dir, "sha256.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(c)), strings.TrimSpace(string(sha))
}

// tcTrace reads the trace context stored beside an event.
func tcTrace(t *testing.T, b kernelfix.Bundle, eventID string) (parent, state *string) {
	t.Helper()
	if err := b.Admin.QueryRow(context.Background(), `SELECT traceparent, tracestate FROM outbox.outbox_events WHERE event_id = $1::uuid`,
		eventID).Scan(&parent, &state); err != nil {
		t.Fatal(err)
	}
	return parent, state
}

// R-DP-7, D-2 (golden): the envelope golden appended with a trace context is stored, digested,
// claimed and acknowledged exactly as without one - the digest is the golden's, the claimed
// bytes are the golden's - and the trace context comes back beside it from the claim. The same
// golden appended without a trace context (a second database) gives the same bytes, digest and
// an empty trace context.
func TestTraceContextBesideTheEnvelopeGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	golden, goldenSHA := tcGolden(t)
	for _, withTrace := range []bool{true, false} {
		b := kernelfix.Setup(t)
		producer := testdb.Conn(t, b.Dsn, "outbox_producer")
		p := pgcall.AppendParams{Event: json.RawMessage(golden), CanonicalText: &golden, EnvelopeSHA256: &goldenSHA}
		wantParent, wantState := "", ""
		if withTrace {
			p.TraceParent, p.TraceState = tcParent, tcState
			wantParent, wantState = tcParent, tcState
		}
		r, err := pgcall.AppendEvent(ctx, producer, p)
		if err != nil {
			t.Fatalf("trace %v: append golden: %v", withTrace, err)
		}
		if r.EnvelopeSHA256 != goldenSHA {
			t.Fatalf("trace %v: digest %s, golden %s", withTrace, r.EnvelopeSHA256, goldenSHA)
		}
		var stored string
		if err := b.Admin.QueryRow(ctx, `SELECT event_envelope_canonical FROM outbox.outbox_events WHERE event_id = $1::uuid`, r.EventID).
			Scan(&stored); err != nil || stored != golden {
			t.Fatalf("trace %v: stored canonical %q (%v), want the golden", withTrace, stored, err)
		}
		// the database's own canonicalizer reproduces the stored digest (verify_event_digests)
		if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.verify_event_digests()`); n != 0 {
			t.Fatalf("trace %v: %d digest problems", withTrace, n)
		}
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps)
		if string(c.EventEnvelopeCanonical) != golden || c.EventEnvelopeSHA256 != goldenSHA {
			t.Fatalf("trace %v: claimed %s / %s, want the golden", withTrace, c.EventEnvelopeCanonical, c.EventEnvelopeSHA256)
		}
		if sum, _ := canon.SHA256Hex(c.EventEnvelopeCanonical); sum != goldenSHA {
			t.Fatalf("trace %v: claimed bytes digest %s", withTrace, sum)
		}
		if c.TraceParent != wantParent || c.TraceState != wantState {
			t.Fatalf("trace %v: claimed trace context %q %q, want %q %q", withTrace, c.TraceParent, c.TraceState, wantParent, wantState)
		}
		if res := kernelfix.Ack(t, b.Disp, c); res != "complete" && res != "not_complete" {
			t.Fatalf("trace %v: ack %s", withTrace, res)
		}
		var ackDigest string
		if err := b.Admin.QueryRow(ctx, `SELECT ack_receipt_digest FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
			c.Destination, c.EventID).Scan(&ackDigest); err != nil || len(ackDigest) != 64 {
			t.Fatalf("trace %v: receipt digest %q (%v)", withTrace, ackDigest, err)
		}
	}
}

// R-DP-7: append_events stores the call's trace context beside every event it appends; a
// re-append of an existing event keeps the context stored first; an empty tracestate is NULL;
// a call without one stores NULL (nothing changes).
func TestTraceContextAppendEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	producer := testdb.Conn(t, b.Dsn, "outbox_producer")
	envs := []map[string]any{
		testfix.Envelope(kernelfix.Metering, "1", "agg-1", 1),
		testfix.Envelope(kernelfix.Metering, "1", "agg-2", 1),
		testfix.Envelope(kernelfix.Metering, "1", "agg-3", 1),
	}
	raw, _ := json.Marshal(envs)
	rs, err := pgcall.AppendEvents(ctx, producer, pgcall.AppendEventsParams{Events: raw, TraceParent: tcParent, TraceState: tcState})
	if err != nil || len(rs) != 3 {
		t.Fatalf("append_events: %v %v", rs, err)
	}
	for _, r := range rs {
		if p, s := tcTrace(t, b, r.EventID); p == nil || *p != tcParent || s == nil || *s != tcState {
			t.Fatalf("event %s: trace %v %v", r.EventID, p, s)
		}
	}
	// re-append of the first (same digest) with another context: idempotent, first context kept
	other := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	one, _ := json.Marshal(envs[0])
	if _, err := pgcall.AppendEvent(ctx, producer, pgcall.AppendParams{Event: one, TraceParent: other}); err != nil {
		t.Fatal(err)
	}
	if p, s := tcTrace(t, b, rs[0].EventID); p == nil || *p != tcParent || s == nil || *s != tcState {
		t.Fatalf("re-append changed the stored trace context: %v %v", p, s)
	}
	// a traceparent alone; tracestate "" is no tracestate
	e4 := testfix.Envelope(kernelfix.Metering, "1", "agg-4", 1)
	raw4, _ := json.Marshal(e4)
	var id4 string
	if err := producer.QueryRow(ctx, `SELECT event_id::text FROM outbox.append_event($1::json, NULL, NULL, $2, '')`, string(raw4), other).Scan(&id4); err != nil {
		t.Fatal(err)
	}
	if p, s := tcTrace(t, b, id4); p == nil || *p != other || s != nil {
		t.Fatalf("traceparent alone: %v %v", p, s)
	}
	// no trace context: NULL
	e5 := testfix.Envelope(kernelfix.Metering, "1", "agg-5", 1)
	id5 := testfix.Append(t, producer, e5)
	if p, s := tcTrace(t, b, id5); p != nil || s != nil {
		t.Fatalf("no trace context stored %v %v", p, s)
	}
	// named notation (the parameters are optional and named)
	e6 := testfix.Envelope(kernelfix.Metering, "1", "agg-6", 1)
	raw6, _ := json.Marshal(e6)
	var id6 string
	if err := producer.QueryRow(ctx, `SELECT event_id::text FROM outbox.append_event($1::json, p_traceparent => $2)`, string(raw6), tcParent).Scan(&id6); err != nil {
		t.Fatal(err)
	}
	if p, _ := tcTrace(t, b, id6); p == nil || *p != tcParent {
		t.Fatalf("named traceparent: %v", p)
	}
	// the event row is immutable, the trace context included (OB202)
	_, err = b.Admin.Exec(ctx, `UPDATE outbox.outbox_events SET traceparent = $2 WHERE event_id = $1::uuid`, id5, tcParent)
	kernelfix.WantState(t, err, "OB202")
}

// R-DP-7, W3C Trace Context: an invalid trace context is 22023 with a DETAIL naming the defect,
// and the call appends nothing; the recommendation's valid edge cases are accepted.
func TestTraceContextValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	producer := testdb.Conn(t, b.Dsn, "outbox_producer")
	bad := map[string][2]string{
		"not hex":                {"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", ""},
		"upper case":             {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		"short trace id":         {"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", ""},
		"version ff":             {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		"version 00 with suffix": {tcParent + "-extra", ""},
		"zero trace id":          {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		"zero parent id":         {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		"empty traceparent":      {"", "x"},
		"state without parent":   {"", "rojo=1"},
		"state member no value":  {tcParent, "rojo"},
		"state upper-case key":   {tcParent, "Rojo=1"},
		"state value with comma": {tcParent, "rojo=a=b"},
		"state 33 members":       {tcParent, strings.TrimSuffix(strings.Repeat("k=v,", 33), ",")},
		"state too long":         {tcParent, "k=" + strings.Repeat("v", 520)},
	}
	for name, c := range bad {
		env := testfix.Envelope(kernelfix.Metering, "1", "agg-"+name, 1)
		raw, _ := json.Marshal(env)
		var parent, state any
		if name != "empty traceparent" && name != "state without parent" {
			parent = c[0]
		} else if name == "empty traceparent" {
			parent = ""
		}
		if c[1] != "" {
			state = c[1]
		}
		_, err := producer.Exec(ctx, `SELECT * FROM outbox.append_event($1::json, NULL, NULL, $2::text, $3::text)`, string(raw), parent, state)
		if err == nil || pgcall.SQLState(err) != kernelfix.SQLStateParam || !strings.Contains(err.Error(), "trace context") {
			t.Errorf("%s: want 22023 invalid trace context, got %v", name, err)
		}
		_, err = producer.Exec(ctx, `SELECT * FROM outbox.append_events(json_build_array($1::json), NULL, NULL, $2::text, $3::text)`, string(raw), parent, state)
		if pgcall.SQLState(err) != kernelfix.SQLStateParam {
			t.Errorf("%s (append_events): want 22023, got %v", name, err)
		}
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_events`); n != 0 {
		t.Fatalf("%d events appended by refused calls", n)
	}
	good := map[string][2]string{
		"later version with suffix": {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future-holds", ""},
		"flags 00":                  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
		"state empty members, OWS":  {tcParent, " rojo=1 ,, congo=2\t,"},
		"state tenant@system key":   {tcParent, "tenant1@vendor=x,a*b/c_d-e=~!"},
		"state 32 members":          {tcParent, strings.TrimSuffix(strings.Repeat("k=v,", 32), ",")},
	}
	for name, c := range good {
		env := testfix.Envelope(kernelfix.Metering, "1", "good-"+name, 1)
		raw, _ := json.Marshal(env)
		if _, err := pgcall.AppendEvent(ctx, producer, pgcall.AppendParams{Event: raw, TraceParent: c[0], TraceState: c[1]}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// R-DP-7: the producer library stores the W3C trace context of the span active in its
// context.Context (Append, AppendDocument, AppendMany) and nothing without one; the digest is
// the same either way (the same envelope appended twice, with and without a span, is one event).
func TestTraceContextFromProducerContext(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	prod := testdb.Conn(t, b.Dsn, "outbox_producer")
	ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled, TraceState: ts,
	})
	spanCtx := trace.ContextWithSpanContext(context.Background(), sc)
	ev := func(agg string) producer.Event {
		e := sampleEvent()
		e.EventType, e.EventSchemaVersion, e.AggregateID = kernelfix.Metering, "1", agg
		e.Tenant.ProjectID = ""
		return e
	}
	r1, err := producer.Append(spanCtx, prod, ev("p-1"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := producer.AppendMany(spanCtx, prod, []producer.Event{ev("p-2"), ev("p-3")})
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := producer.Envelope(ev("p-4"))
	if err != nil {
		t.Fatal(err)
	}
	r4, err := producer.AppendDocument(spanCtx, prod, doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{r1.EventID, rs[0].EventID, rs[1].EventID, r4.EventID} {
		if p, s := tcTrace(t, b, id); p == nil || *p != tcParent || s == nil || *s != "rojo=00f067aa0ba902b7" {
			t.Fatalf("event %s: trace %v %v, want %s", id, p, s, tcParent)
		}
	}
	// without a span: NULL, and the same envelope's digest does not depend on the span
	plain := ev("p-5")
	plain.EventID, plain.OccurredAt = testfix.NewUUID(), time.Now()
	r5, err := producer.Append(context.Background(), prod, plain)
	if err != nil {
		t.Fatal(err)
	}
	if p, s := tcTrace(t, b, r5.EventID); p != nil || s != nil {
		t.Fatalf("no span: trace %v %v", p, s)
	}
	again, err := producer.Append(spanCtx, prod, plain)
	if err != nil || again.EnvelopeSHA256 != r5.EnvelopeSHA256 || again.EventID != r5.EventID {
		t.Fatalf("re-append with a span: %+v %v, first %+v", again, err, r5)
	}
}
