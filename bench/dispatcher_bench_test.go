//go:build bench

package bench

// Dispatcher benchmarks (issue "Go dispatcher", R-DP-1), against the local cluster with fsync on:
//
//   BenchmarkDispatcherEndToEnd/<transport>/<n>dest  delivered events/s through the whole loop
//       (claim → verify digest → deliver → ack_delivery with a Go-built receipt verified by the
//       database → publication), in-process transport and HTTP on loopback (HMAC-signed), 1 and
//       4 destinations. b.N events are appended first (timer stopped, hot path, 1000 per
//       producer transaction); then a dispatcher starts and is timed until every one is
//       acknowledged.
//   BenchmarkDispatcherCPU/<variant>  the dispatcher's own CPU per delivered event (P-5), below.
//   BenchmarkDispatcherRSS10kInFlight  resident set size of the process with 10,000 deliveries
//       claimed and in flight at once (consumer blocked), and the delta over the same process
//       before the dispatcher started.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// One event type per reference destination, each with that destination as its only member.
var dispBenchDests = []struct{ dest, eventType, schema, kind, prefix, timeField string }{
	{"metering_input_processor", "execution.attempt-eligibility.finalized@1", "1", "metering_input_processor", "meteringInputProcessorConsumerReceipt", "committedAt"},
	{"billing_finalization_coordinator", "execution.run-finalization.closed@1", "1", "billing_finalization_coordinator", "billingFinalizationCoordinatorConsumerReceipt", "committedAt"},
	{"billing_settlement_catch_up", "metering.settlement-input.current-changed@1", "1", "billing_settlement_catch_up", "billingSettlementCatchUpConsumerReceipt", "committedAt"},
	{"core_operations", "run.created@2.0", "2.0", "operations_projection", "operationsProjectionAppliedReceipt", "appliedAt"},
}

const dispBenchSecret = "bench-secret-0123456789abcdef"

// dispBenchAnswer is a correct consumer's answer: receipt + ActiveConsumerAck@1 (R-AK-1a).
func dispBenchAnswer(d wire.Delivery) (ack, receipt json.RawMessage) {
	var k = dispBenchDests[0]
	for _, x := range dispBenchDests {
		if x.dest == d.Destination {
			k = x
		}
	}
	p := k.prefix
	body := map[string]any{
		p + "SchemaVersion": d.ExpectedReceiptSchemaVersion, p + "DigestAlgorithmVersion": canon.Algorithm,
		"destination": d.Destination, "consumerName": d.ConsumerName, "eventId": d.EventID,
		"eventEnvelopeDigestAlgorithmVersion": d.EnvelopeDigestAlgorithmVersion, "eventEnvelopeSha256": d.EnvelopeSHA256,
	}
	if k.kind == "operations_projection" {
		body["projectionName"], body["projectionVersion"] = d.RequiredProjectionName, d.RequiredProjectionVersion
		body["eventType"], body["eventSchemaVersion"] = k.eventType, k.schema
	}
	dg, _ := canon.Digest(body)
	ref := "bench:" + d.EventID
	body[p+"Ref"], body[p+"Digest"] = ref, dg
	body[k.timeField] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	a := map[string]any{"destination": d.Destination, "consumerName": d.ConsumerName, "eventId": d.EventID,
		"eventEnvelopeDigestAlgorithmVersion": d.EnvelopeDigestAlgorithmVersion, "eventEnvelopeSha256": d.EnvelopeSHA256,
		"appliedReceipt": map[string]any{"kind": k.kind, p + "Ref": ref, p + "SchemaVersion": d.ExpectedReceiptSchemaVersion,
			p + "DigestAlgorithmVersion": canon.Algorithm, p + "Digest": dg}}
	ack, _ = json.Marshal(a)
	receipt, _ = json.Marshal(body)
	return ack, receipt
}

type dispBenchConsumer struct{ block chan struct{} }

func (c dispBenchConsumer) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return wire.Result{}, ctx.Err()
		}
	}
	ack, rc := dispBenchAnswer(d)
	return wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: rc}, nil
}

func (c dispBenchConsumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if _, ok := wire.VerifyRequest([]byte(dispBenchSecret), r.Header, body); !ok {
		w.WriteHeader(401)
		return
	}
	an, _ := strconv.Atoi(r.Header.Get(wire.HeaderAttemptNumber))
	sv, _ := strconv.Atoi(r.Header.Get(wire.HeaderReceiptSchema))
	d := wire.Delivery{Destination: r.Header.Get(wire.HeaderDestination), ConsumerName: r.Header.Get(wire.HeaderConsumer),
		EventID: r.Header.Get(wire.HeaderEventID), AttemptNumber: an, ExpectedReceiptSchemaVersion: sv,
		EnvelopeDigestAlgorithmVersion: canon.Algorithm, EnvelopeSHA256: r.Header.Get(wire.HeaderEnvelopeSHA256)}
	if p := r.Header.Get(wire.HeaderProjection); p != "" {
		name, v, _ := strings.Cut(p, "@")
		d.RequiredProjectionName = name
		d.RequiredProjectionVersion, _ = strconv.Atoi(v)
	}
	ack, rc := dispBenchAnswer(d)
	b, _ := json.Marshal(wire.HTTPSuccessBody{Ack: ack, Receipt: rc})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

type dispBenchRun struct {
	m      *metrics.Metrics
	cancel context.CancelFunc
	done   chan error
	pool   *pgxpool.Pool
}

func dispBenchStart(b *testing.B, dsn string, cfg *config.Config, trs map[string]transport.Transport) *dispBenchRun {
	b.Helper()
	pc, err := dispatcher.PoolConfig(cfg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.New()
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: trs, Metrics: m,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Preflight(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &dispBenchRun{m: m, cancel: cancel, done: make(chan error, 1), pool: pool}
	go func() { r.done <- d.Run(ctx) }()
	return r
}

func (r *dispBenchRun) stop() {
	r.cancel()
	<-r.done
	r.pool.Close()
}

func (r *dispBenchRun) acked(n int) float64 {
	s := 0.0
	for _, x := range dispBenchDests[:n] {
		s += testutil.ToFloat64(r.m.Acks.WithLabelValues(x.dest, x.eventType, x.schema, "complete"))
	}
	return s
}

func dispBenchConfig(n int, transportKind, url string) *config.Config {
	c := config.Defaults()
	c.Mode = config.ModeDevelopment
	c.WorkerName = "bench-dispatcher"
	c.BatchSize = 64
	c.Concurrency = 64
	c.DBMaxConns = 16
	if v, err := strconv.Atoi(os.Getenv("DISPBENCH_DB_CONNS")); err == nil {
		c.DBMaxConns = v
	}
	if v, err := strconv.Atoi(os.Getenv("DISPBENCH_CONCURRENCY")); err == nil {
		c.Concurrency, c.BatchSize = v, min(v, 1000)
	}
	c.Lease = time.Minute
	c.PollInterval = 100 * time.Millisecond
	c.DatabaseRole = "outbox_dispatcher"
	c.Destinations = map[string]config.Destination{}
	for _, x := range dispBenchDests[:n] {
		d := config.Destination{Transport: transportKind, Auth: config.AuthNone}
		if transportKind == config.TransportHTTP {
			d.URL, d.Timeout, d.Auth, d.MaxResponseBytes = url, 10*time.Second, config.AuthHMAC, 1<<20
		}
		c.Destinations[x.dest] = d
	}
	return &c
}

// dispBenchAppend appends count events spread over the first n destinations in one producer
// transaction (hot path: Go canonicalization, the database verifies the digest).
func dispBenchAppend(b *testing.B, dsn string, n, count int) {
	b.Helper()
	ctx := context.Background()
	conn := testdb.Conn(b, dsn, "")
	for done := 0; done < count; {
		chunk := min(count-done, 1000)
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < chunk; i++ {
			x := dispBenchDests[(done+i)%n]
			testfix.AppendHot(b, tx, testfix.Envelope(x.eventType, x.schema, "bench-agg-"+strconv.Itoa(done+i), 1))
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		done += chunk
	}
}

func BenchmarkDispatcherEndToEnd(b *testing.B) {
	for _, tk := range []string{config.TransportInProcess, config.TransportHTTP} {
		for _, n := range []int{1, 4} {
			b.Run(tk+"/"+strconv.Itoa(n)+"dest", func(b *testing.B) {
				dsn := testdb.URL(b)
				admin := testdb.Conn(b, dsn, "")
				testfix.ActivateReference(b, admin)
				var url string
				if tk == config.TransportHTTP {
					srv := httptest.NewServer(dispBenchConsumer{})
					defer srv.Close()
					url = srv.URL + "/deliver"
				}
				cfg := dispBenchConfig(n, tk, url)
				trs := map[string]transport.Transport{}
				if tk == config.TransportInProcess {
					cons := map[string]wire.Consumer{}
					for name := range cfg.Destinations {
						cons[name] = dispBenchConsumer{}
					}
					ip := transport.NewInProcess(cons)
					for name := range cfg.Destinations {
						trs[name] = ip
					}
				} else {
					h, err := transport.NewHTTP(transport.HTTPOptions{URL: url, Timeout: 10 * time.Second, Auth: config.AuthHMAC,
						Secret: config.NewSecret([]byte(dispBenchSecret))})
					if err != nil {
						b.Fatal(err)
					}
					for name := range cfg.Destinations {
						trs[name] = h
					}
				}
				// b.N is the number of events (make bench: -benchtime 2000x → 2000 events). The
				// backlog is appended first (untimed); then the dispatcher starts and is timed until
				// every event is acknowledged (ns/op = ns per delivered event).
				b.StopTimer()
				dispBenchAppend(b, dsn, n, b.N)
				b.StartTimer()
				start := time.Now()
				r := dispBenchStart(b, dsn, cfg, trs)
				defer r.stop()
				for r.acked(n) < float64(b.N) {
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			})
		}
	}
}

func dispBenchRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// dispBenchRSSResult caches the one measurement: the framework calls the benchmark more than
// once (b.N = 1, then the requested count) and the measurement does not depend on b.N.
var dispBenchRSSResult map[string]float64

func BenchmarkDispatcherRSS10kInFlight(b *testing.B) {
	if dispBenchRSSResult == nil {
		dispBenchRSSResult = dispBenchMeasureRSS(b)
	}
	for unit, v := range dispBenchRSSResult {
		b.ReportMetric(v, unit)
	}
}

func dispBenchMeasureRSS(b *testing.B) map[string]float64 {
	inflight := 10000
	if s := os.Getenv("DISPBENCH_INFLIGHT"); s != "" {
		inflight, _ = strconv.Atoi(s)
	}
	b.StopTimer()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	dispBenchAppend(b, dsn, 1, inflight)
	runtime.GC()
	before := dispBenchRSS()
	block := make(chan struct{})
	cfg := dispBenchConfig(1, config.TransportInProcess, "")
	cfg.Concurrency = inflight
	cfg.BatchSize = 1000
	cfg.Lease = 10 * time.Minute
	ip := transport.NewInProcess(map[string]wire.Consumer{dispBenchDests[0].dest: dispBenchConsumer{block: block}})
	b.StartTimer()
	start := time.Now()
	r := dispBenchStart(b, dsn, cfg, map[string]transport.Transport{dispBenchDests[0].dest: ip})
	for testutil.ToFloat64(r.m.InFlight) < float64(inflight) {
		time.Sleep(5 * time.Millisecond)
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("only %v in flight after 2 minutes", testutil.ToFloat64(r.m.InFlight))
		}
	}
	fill := time.Since(start)
	b.StopTimer()
	at := dispBenchRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res := map[string]float64{
		"RSS_MiB": at, "RSS_delta_MiB": at - before, "heap_inuse_MiB": float64(ms.HeapInuse) / (1 << 20),
		"goroutines": float64(runtime.NumGoroutine()), "fill_s": fill.Seconds(), "inflight": float64(inflight),
	}
	close(block)
	drainStart := time.Now()
	for r.acked(1) < float64(inflight) {
		time.Sleep(10 * time.Millisecond)
		if time.Since(drainStart) > 3*time.Minute {
			b.Fatalf("only %v of %d acknowledged after release", r.acked(1), inflight)
		}
	}
	res["ack_events/s"] = float64(inflight) / time.Since(drainStart).Seconds()
	r.stop()
	return res
}

// BenchmarkDispatcherCPU reports the dispatcher's own CPU per delivered event (SPEC P-5): b.N
// events (4 destinations) are appended first through the hot path and every consumer answer
// (receipt + ActiveConsumerAck@1) is built before the clock starts, so the in-process consumer
// costs a map lookup; the process's user+system CPU (getrusage) is read before the dispatcher
// starts and after the last ack, and divided by b.N. What remains is the dispatcher: claims,
// the envelope check, the D-2 receipt candidate, outcome calls, pgx, logging, metrics and the
// Go runtime. Variants:
//
//	grouped        the defaults: sha256-only envelope check, outcomes grouped (2 ms flush)
//	one_call_each  outcome_flush_interval = 0: one outcome call per delivery
//	legacy_rows    the rows' stored canonical text removed (as for rows written outside
//	               append_event): the dispatcher canonicalizes every envelope in Go
//
// Besides cpu_us/event: events/s and outcome_calls/event (outcome_batch_size _count / _sum).
func BenchmarkDispatcherCPU(b *testing.B) {
	for _, v := range []struct {
		name   string
		flush  time.Duration
		legacy bool
	}{{"grouped", 2 * time.Millisecond, false}, {"one_call_each", 0, false}, {"legacy_rows", 2 * time.Millisecond, true}} {
		b.Run(v.name, func(b *testing.B) {
			const n = 4
			b.StopTimer()
			dsn := testdb.URL(b)
			admin := testdb.Conn(b, dsn, "")
			testfix.ActivateReference(b, admin)
			dispBenchAppend(b, dsn, n, b.N)
			ctx := context.Background()
			if v.legacy {
				for _, q := range []string{`SET session_replication_role = replica`,
					`UPDATE outbox.outbox_events SET event_envelope_canonical = NULL`, `RESET session_replication_role`} {
					if _, err := admin.Exec(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
			}
			answers := dispBenchAnswers(b, admin)
			cfg := dispBenchConfig(n, config.TransportInProcess, "")
			cfg.OutcomeFlushInterval = v.flush
			cons := map[string]wire.Consumer{}
			for name := range cfg.Destinations {
				cons[name] = answers
			}
			ip := transport.NewInProcess(cons)
			trs := map[string]transport.Transport{}
			for name := range cfg.Destinations {
				trs[name] = ip
			}
			runtime.GC()
			cpu0 := dispBenchCPU(b)
			b.StartTimer()
			start := time.Now()
			r := dispBenchStart(b, dsn, cfg, trs)
			for r.acked(n) < float64(b.N) {
				time.Sleep(5 * time.Millisecond)
			}
			elapsed := time.Since(start)
			cpu := dispBenchCPU(b) - cpu0
			b.StopTimer()
			var calls, items float64
			for _, op := range []string{"ack", "retry", "quarantine"} {
				var pb dto.Metric
				if err := r.m.OutcomeBatchSize.WithLabelValues(op).(prometheus.Metric).Write(&pb); err != nil {
					b.Fatal(err)
				}
				calls += float64(pb.GetHistogram().GetSampleCount())
				items += pb.GetHistogram().GetSampleSum()
			}
			r.stop()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/event")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(calls/float64(b.N), "outcome_calls/event")
			if items != float64(b.N) {
				b.Errorf("outcome items %g for %d events", items, b.N)
			}
		})
	}
}

// dispBenchCPU is the process's user+system CPU time so far.
func dispBenchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dispBenchPrebuilt answers every delivery with a receipt and ack built in advance.
type dispBenchPrebuilt map[string]wire.Result

func (p dispBenchPrebuilt) Deliver(_ context.Context, d wire.Delivery) (wire.Result, error) {
	res, ok := p[d.Destination+"/"+d.EventID]
	if !ok {
		return wire.Result{}, errors.New("bench consumer: no answer prepared for " + d.Destination + "/" + d.EventID)
	}
	return res, nil
}

// dispBenchAnswers builds the answer of every delivery in the database (what a correct
// consumer would return), keyed by destination/event id.
func dispBenchAnswers(b *testing.B, admin *pgx.Conn) dispBenchPrebuilt {
	rows, err := admin.Query(context.Background(), `
		SELECT d.destination, d.consumer_name, d.event_id::text, d.expected_receipt_schema_version,
		       COALESCE(d.required_projection_name, ''), COALESCE(d.required_projection_version, 0), e.event_envelope_sha256
		FROM outbox.outbox_deliveries d JOIN outbox.outbox_events e ON e.event_id = d.event_id`)
	if err != nil {
		b.Fatal(err)
	}
	out := dispBenchPrebuilt{}
	for rows.Next() {
		var d wire.Delivery
		if err := rows.Scan(&d.Destination, &d.ConsumerName, &d.EventID, &d.ExpectedReceiptSchemaVersion,
			&d.RequiredProjectionName, &d.RequiredProjectionVersion, &d.EnvelopeSHA256); err != nil {
			b.Fatal(err)
		}
		d.EnvelopeDigestAlgorithmVersion = canon.Algorithm
		ack, rc := dispBenchAnswer(d)
		out[d.Destination+"/"+d.EventID] = wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: rc}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}
