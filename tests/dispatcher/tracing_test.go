package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// syncBuffer is a log sink shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// R-DP-7: one event followed from the producer's request through a retry to the consumer kit,
// with an in-memory span exporter. The producer appends inside an active span; the stored
// traceparent goes out as the traceparent header of both HTTP attempts; the consumer kit fails
// the first apply (retryable) and applies the second. Each of the two dispatcher delivery spans
// and the two kit handling spans is in its OWN trace (not a child of the append) and LINKS to
// the producer's span; both sides' log lines carry the producer's trace id. An event appended
// without a span gets no trace header, spans without links and log lines without trace_id:
// nothing changes for it (transport tests compare its wire byte for byte).
//
// Not parallel: the consumer kit's spans go to the global tracer provider, which this test sets.
func TestTracingFollowsOneEventThroughARetry(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	const dest = "metering_input_processor"
	db := dispatcherfix.Setup(t, dest)
	kb := consumerfix.Setup(t)
	var spec reference.Spec
	for _, s := range reference.All() {
		if s.Destination == dest {
			spec = s
		}
	}
	secret := []byte(dispatcherfix.Secret)
	kitLog := &syncBuffer{}
	var failed sync.Map // event id → the first apply failed
	kit := kb.Kit(t, spec.ConsumerName, func(c *consumer.Config) {
		c.HMACSecret = secret
		c.Logger = slog.New(slog.NewJSONHandler(kitLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
		orig := c.Apply
		c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
			if _, again := failed.LoadOrStore(ev.EventID, true); !again {
				return consumer.ReceiptFields{}, errors.New("simulated: a transient failure of the first apply")
			}
			return orig(ctx, tx, ev)
		}
	})
	var reqMu sync.Mutex
	headers := map[string][]http.Header{} // event id → request headers per attempt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqMu.Lock()
		headers[r.Header.Get(wire.HeaderEventID)] = append(headers[r.Header.Get(wire.HeaderEventID)], r.Header.Clone())
		reqMu.Unlock()
		kit.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h, err := transport.NewHTTP(transport.HTTPOptions{URL: srv.URL, Timeout: 10 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret(secret)})
	if err != nil {
		t.Fatal(err)
	}

	// the dispatcher, with its logs kept
	cfg := dispatcherfix.Config("dp-trace", map[string]config.Destination{dest: dispatcherfix.HTTPDest(srv.URL)})
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	pc, err := dispatcher.PoolConfig(cfg, db.Dsn)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dispLog := &syncBuffer{}
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: map[string]transport.Transport{dest: h},
		Metrics: metrics.New(), Logger: slog.New(slog.NewJSONHandler(dispLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	// the producer's request: an active span around the append
	prod := testdb.Conn(t, db.Dsn, "outbox_producer")
	ev := func(agg string) producer.Event {
		return producer.Event{EventType: dispatcherfix.MeteringType, EventSchemaVersion: "1", AggregateID: agg, AggregateRevision: 1,
			Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "tenant-1", WorkspaceID: "workspace-1"},
			CorrelationID: "corr-" + agg, CausationID: "cause-" + agg, OperationID: "op-" + agg}
	}
	reqCtx, reqSpan := tp.Tracer("checkout-service").Start(context.Background(), "POST /checkout")
	traced, err := producer.Append(reqCtx, prod, ev("agg-traced"))
	reqSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := producer.Append(context.Background(), prod, ev("agg-plain"))
	if err != nil {
		t.Fatal(err)
	}
	producerSC := reqSpan.SpanContext()
	var stored string
	if err := db.Admin.QueryRow(context.Background(), `SELECT traceparent FROM outbox.outbox_events WHERE event_id = $1::uuid`, traced.EventID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := "00-" + producerSC.TraceID().String() + "-" + producerSC.SpanID().String() + "-01"; stored != want {
		t.Fatalf("stored traceparent %q, want the producer span's %q", stored, want)
	}

	dispatcherfix.Eventually(t, "both events acknowledged", func() bool {
		return db.Status(t, dest, traced.EventID) == "acknowledged" && db.Status(t, dest, plain.EventID) == "acknowledged"
	})
	for _, id := range []string{traced.EventID, plain.EventID} {
		if got := db.Attempts(t, dest, id); len(got) != 2 || got[0].Outcome != "retryable" || got[1].Outcome != "acknowledged" {
			t.Fatalf("event %s attempts %+v, want retryable then acknowledged", id, got)
		}
	}

	// the wire: the traced event's two requests carry the stored traceparent; the plain one none
	reqMu.Lock()
	for _, hd := range headers[traced.EventID] {
		if hd.Get("traceparent") != stored {
			t.Errorf("traced request traceparent %q, want %q", hd.Get("traceparent"), stored)
		}
	}
	for _, hd := range headers[plain.EventID] {
		if _, ok := hd["Traceparent"]; ok {
			t.Errorf("plain request carries a traceparent: %v", hd)
		}
		if _, ok := hd["Tracestate"]; ok {
			t.Errorf("plain request carries a tracestate: %v", hd)
		}
	}
	if len(headers[traced.EventID]) != 2 || len(headers[plain.EventID]) != 2 {
		t.Fatalf("requests: traced %d, plain %d; want 2 each", len(headers[traced.EventID]), len(headers[plain.EventID]))
	}
	reqMu.Unlock()

	// the spans: two delivery and two handling spans per event, each in its own trace; the
	// traced event's link to the producer's span, the plain event's link to nothing
	count := func(id, name string) int {
		n := 0
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == name && spanAttr(s, "pgoutbox.event_id") == id {
				n++
			}
		}
		return n
	}
	dispatcherfix.Eventually(t, "four spans per event", func() bool {
		return count(traced.EventID, dispatcher.DeliverySpanName) == 2 && count(traced.EventID, consumer.HandlingSpanName) == 2 &&
			count(plain.EventID, dispatcher.DeliverySpanName) == 2 && count(plain.EventID, consumer.HandlingSpanName) == 2
	})
	answers := map[string][]string{}
	for _, s := range exp.GetSpans().Snapshots() {
		id := spanAttr(s, "pgoutbox.event_id")
		if id != traced.EventID && id != plain.EventID {
			continue
		}
		if s.Parent().IsValid() {
			t.Errorf("%s of %s has a parent %s: it must be a new root, linked", s.Name(), id, s.Parent().SpanID())
		}
		if s.SpanContext().TraceID() == producerSC.TraceID() {
			t.Errorf("%s of %s is in the producer's trace: a child, not a link", s.Name(), id)
		}
		links := s.Links()
		if id == plain.EventID {
			if len(links) != 0 {
				t.Errorf("%s of the plain event has links %v", s.Name(), links)
			}
			continue
		}
		if len(links) != 1 || links[0].SpanContext.TraceID() != producerSC.TraceID() || links[0].SpanContext.SpanID() != producerSC.SpanID() ||
			!links[0].SpanContext.IsRemote() {
			t.Errorf("%s attempt %s links %v, want one link to the producer span %s/%s", s.Name(), spanAttr(s, "pgoutbox.attempt_number"),
				links, producerSC.TraceID(), producerSC.SpanID())
		}
		answers[s.Name()] = append(answers[s.Name()], spanAttr(s, "pgoutbox.attempt_number")+":"+spanAttr(s, "pgoutbox.answer"))
	}
	for _, name := range []string{dispatcher.DeliverySpanName, consumer.HandlingSpanName} {
		got := strings.Join(answers[name], ",")
		if got != "1:retryable,2:acknowledged" && got != "2:acknowledged,1:retryable" {
			t.Errorf("%s answers %q, want attempt 1 retryable and attempt 2 acknowledged", name, got)
		}
	}

	// the logs: the producer's trace id on both sides for the traced event, none for the plain one
	tid := `"trace_id":"` + producerSC.TraceID().String() + `"`
	for side, buf := range map[string]*syncBuffer{"dispatcher": dispLog, "consumer kit": kitLog} {
		var tracedLines, withID int
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, plain.EventID) && strings.Contains(line, `"trace_id"`) {
				t.Errorf("%s log line of the plain event has a trace id: %s", side, line)
			}
			if strings.Contains(line, traced.EventID) {
				tracedLines++
				if strings.Contains(line, tid) {
					withID++
				}
			}
		}
		if tracedLines == 0 || withID != tracedLines {
			t.Errorf("%s: %d of %d log lines of the traced event carry the producer's trace id\n%s", side, withID, tracedLines, buf.String())
		}
	}
}
