// Package dispatcherfix is shared by the dispatcher tests and by the other test rooms under
// tests/ that run a dispatcher. Helpers of the dispatcher tests (dispatcher,
// cmd/dispatcher): a fresh database with the reference release, a dispatcher running in this
// process as outbox_dispatcher, and a small fake consumer that builds valid receipts and
// ActiveConsumerAck@1 documents per the contract (R-AK-1, R-AK-1a).
package dispatcherfix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// MeteringDest is the destination the dispatcher tests deliver to; Secret its HMAC secret.
const (
	MeteringType = "execution.attempt-eligibility.finalized@1" // → metering_input_processor only
	MeteringDest = "metering_input_processor"
	Secret       = "dispatcher-test-secret-0123456789"
)

// DB is one test database with the reference release active (see Setup).
type DB struct {
	Dsn   string
	Admin *pgx.Conn // superuser: fixtures and assertions only
}

// Setup gives a fresh database with the reference release active and fast retries for dests.
func Setup(t *testing.T, fastRetryDests ...string) *DB {
	t.Helper()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	for _, d := range fastRetryDests {
		FastRetry(t, admin, d, 20)
	}
	return &DB{Dsn: dsn, Admin: admin}
}

// FastRetry sets a short retry policy (as outbox_registrar) so retry tests need no long waits.
func FastRetry(t *testing.T, admin *pgx.Conn, dest string, maxAttempts int) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = admin.Exec(ctx, "RESET ROLE") }()
	if _, err := admin.Exec(ctx, `SELECT outbox.set_retry_policy($1, interval '20 milliseconds', 1, interval '50 milliseconds', 0, $2)`, dest, maxAttempts); err != nil {
		t.Fatalf("set retry policy: %v", err)
	}
}

// AppendMetering appends one metering event (a fresh aggregate) and returns its id.
func (db *DB) AppendMetering(t *testing.T) string {
	t.Helper()
	return testfix.Append(t, db.Admin, testfix.Envelope(MeteringType, "1", "agg-"+testfix.NewUUID()[:8], 1))
}

// Status is the state of the delivery of eventID to dest.
func (db *DB) Status(t *testing.T, dest, eventID string) string {
	t.Helper()
	var s string
	if err := db.Admin.QueryRow(context.Background(),
		`SELECT status FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`, dest, eventID).Scan(&s); err != nil {
		t.Fatalf("delivery status: %v", err)
	}
	return s
}

// Count runs a count query (one integer) as the superuser.
func (db *DB) Count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Admin.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Attempt is one delivery attempt as outbox.delivery_attempts records it.
type Attempt struct {
	Number  int
	Worker  string
	Outcome string // "" when unfinished
	Code    string
}

// attempts returns the attempt history (starts joined with finishes) of one delivery.
func (db *DB) Attempts(t *testing.T, dest, eventID string) []Attempt {
	t.Helper()
	rows, err := db.Admin.Query(context.Background(), `
		SELECT s.attempt_number, s.worker, COALESCE(f.outcome, ''), COALESCE(f.normalized_error_code, '')
		FROM outbox.outbox_delivery_attempt_starts s
		LEFT JOIN outbox.outbox_delivery_attempt_finishes f ON f.attempt_id = s.attempt_id
		WHERE s.destination = $1 AND s.event_id = $2::uuid ORDER BY s.attempt_number`, dest, eventID)
	if err != nil {
		t.Fatal(err)
	}
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.Number, &a.Worker, &a.Outcome, &a.Code); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// eventually polls cond (a state check, not a timing assertion) until it holds or the bound
// passes; the bound only keeps a broken test from hanging.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Config is a development-mode config for the given destinations with fast loops.
func Config(worker string, dests map[string]config.Destination) *config.Config {
	c := config.Defaults()
	c.Mode = config.ModeDevelopment
	c.WorkerName = worker
	c.Lease = 30 * time.Second
	c.PollInterval = 200 * time.Millisecond
	c.RecoveryInterval = 200 * time.Millisecond
	c.StatementTimeout = 900 * time.Millisecond
	c.ShutdownGrace = 10 * time.Second
	c.StatsInterval = time.Second
	c.DatabaseRole = "outbox_dispatcher"
	c.MetricsAddress = "127.0.0.1:0"
	c.Destinations = dests
	return &c
}

// Running is a dispatcher running in this process (see Start).
type Running struct {
	D       *dispatcher.Dispatcher
	M       *metrics.Metrics
	Pool    *pgxpool.Pool
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// Start validates cfg, runs a dispatcher as outbox_dispatcher and stops it at test end.
func Start(t *testing.T, db *DB, cfg *config.Config, trs map[string]transport.Transport) *Running {
	t.Helper()
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("test config invalid: %v", errs)
	}
	pc, err := dispatcher.PoolConfig(cfg, db.Dsn)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewJSONHandler(&LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: trs, Metrics: m, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{D: d, M: m, Pool: pool, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t); pool.Close() })
	return r
}

// stop drains the dispatcher and returns Run's result.
func (r *Running) Stop(t *testing.T) error {
	t.Helper()
	if r.stopped {
		return nil
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("dispatcher did not stop")
		return nil
	}
}

// LogWriter sends a logger's lines to the test log.
type LogWriter struct {
	T  *testing.T
	mu sync.Mutex
}

// Write logs p as one line of the test log.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.T.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// dpKinds maps an expected receipt type to its kind, field prefix and time field (the rows of
// outbox.receipt_kinds, R-AK-1a).
var dpKinds = map[string]struct{ kind, prefix, timeField string }{
	"OperationsProjectionAppliedReceipt":            {"operations_projection", "operationsProjectionAppliedReceipt", "appliedAt"},
	"MeteringInputProcessorConsumerReceipt":         {"metering_input_processor", "meteringInputProcessorConsumerReceipt", "committedAt"},
	"BillingFinalizationCoordinatorConsumerReceipt": {"billing_finalization_coordinator", "billingFinalizationCoordinatorConsumerReceipt", "committedAt"},
	"BillingSettlementCatchUpConsumerReceipt":       {"billing_settlement_catch_up", "billingSettlementCatchUpConsumerReceipt", "committedAt"},
}

// Answer builds a valid {ack, receipt} pair for d (what a correct consumer answers).
func Answer(d wire.Delivery) (ack, receipt json.RawMessage, err error) {
	k, ok := dpKinds[d.ExpectedReceiptType]
	if !ok {
		return nil, nil, fmt.Errorf("fake consumer: unknown receipt type %s", d.ExpectedReceiptType)
	}
	p := k.prefix
	body := map[string]any{
		p + "SchemaVersion":                   d.ExpectedReceiptSchemaVersion,
		p + "DigestAlgorithmVersion":          canon.Algorithm,
		"destination":                         d.Destination,
		"consumerName":                        d.ConsumerName,
		"eventId":                             d.EventID,
		"eventEnvelopeDigestAlgorithmVersion": d.EnvelopeDigestAlgorithmVersion,
		"eventEnvelopeSha256":                 d.EnvelopeSHA256,
	}
	if k.kind == "operations_projection" {
		var env struct {
			EventType          string `json:"eventType"`
			EventSchemaVersion string `json:"eventSchemaVersion"`
		}
		if err := json.Unmarshal(d.Envelope, &env); err != nil {
			return nil, nil, err
		}
		body["projectionName"] = d.RequiredProjectionName
		body["projectionVersion"] = d.RequiredProjectionVersion
		body["eventType"] = env.EventType
		body["eventSchemaVersion"] = env.EventSchemaVersion
	}
	digest, err := canon.Digest(body)
	if err != nil {
		return nil, nil, err
	}
	ref := "fake:" + d.EventID
	body[p+"Ref"] = ref
	body[p+"Digest"] = digest
	body[k.timeField] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	ackDoc := map[string]any{
		"destination": d.Destination, "consumerName": d.ConsumerName, "eventId": d.EventID,
		"eventEnvelopeDigestAlgorithmVersion": d.EnvelopeDigestAlgorithmVersion,
		"eventEnvelopeSha256":                 d.EnvelopeSHA256,
		"appliedReceipt": map[string]any{
			"kind": k.kind, p + "Ref": ref, p + "SchemaVersion": d.ExpectedReceiptSchemaVersion,
			p + "DigestAlgorithmVersion": canon.Algorithm, p + "Digest": digest,
		},
	}
	ack, _ = json.Marshal(ackDoc)
	receipt, _ = json.Marshal(body)
	return ack, receipt, nil
}

// Consumer is a fake consumer: it records every call and answers through script (per event,
// by the 1-based number of the call for that event). It is both a wire.Consumer (in-process) and
// an http.Handler speaking docs/transport-http.md (with HMAC verification when secret is set).
type Consumer struct {
	script func(call int, d wire.Delivery) Reply
	secret []byte

	mu      sync.Mutex
	calls   map[string]int     // event id → calls
	applied map[string]int     // event id → times answered with a valid ack
	seen    []wire.Delivery    // every delivery, in order
	Started chan wire.Delivery // optional: every call start
	BadSig  int
}

// Reply is what the fake Consumer answers to one call.
type Reply struct {
	Kind  string // "ack" (valid), "status" (HTTP status+body), "block" (until ctx/release), "result" (in-process)
	Code  int
	Body  string
	Wait  <-chan struct{} // for "block" and optionally before "ack"
	Wres  wire.Result
	sleep time.Duration // before answering
}

// NewConsumer is a fake consumer that answers call n for a delivery with script(n, d).
func NewConsumer(script func(call int, d wire.Delivery) Reply) *Consumer {
	return &Consumer{script: script, calls: map[string]int{}, applied: map[string]int{}}
}

func (c *Consumer) begin(d wire.Delivery) int {
	c.mu.Lock()
	c.calls[d.EventID]++
	n := c.calls[d.EventID]
	c.seen = append(c.seen, d)
	ch := c.Started
	c.mu.Unlock()
	if ch != nil {
		ch <- d
	}
	return n
}

// CallsFor is how many times eventID was delivered to c.
func (c *Consumer) CallsFor(eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[eventID]
}

// AppliedFor is how many times c applied eventID (acknowledged it).
func (c *Consumer) AppliedFor(eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied[eventID]
}

func (c *Consumer) markApplied(id string) {
	c.mu.Lock()
	c.applied[id]++
	c.mu.Unlock()
}

// Deliver implements wire.Consumer (the in-process path).
func (c *Consumer) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	n := c.begin(d)
	r := c.script(n, d)
	if r.sleep > 0 {
		select {
		case <-time.After(r.sleep):
		case <-ctx.Done():
			return wire.Result{}, ctx.Err()
		}
	}
	if r.Wait != nil {
		select {
		case <-r.Wait:
		case <-ctx.Done():
			return wire.Result{}, ctx.Err()
		}
	}
	switch r.Kind {
	case "ack":
		ack, rc, err := Answer(d)
		if err != nil {
			return wire.Result{}, err
		}
		c.markApplied(d.EventID)
		return wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: rc}, nil
	case "result":
		return r.Wres, nil
	}
	return wire.Result{}, errors.New("fake consumer: reply kind not for in-process use: " + r.Kind)
}

// ServeHTTP implements the consumer side of docs/transport-http.md.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if _, ok := wire.VerifyRequest(c.secret, req.Header, body); c.secret != nil && !ok {
		c.mu.Lock()
		c.BadSig++
		c.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	an, _ := strconv.Atoi(req.Header.Get(wire.HeaderAttemptNumber))
	sv, _ := strconv.Atoi(req.Header.Get(wire.HeaderReceiptSchema))
	d := wire.Delivery{
		Destination: req.Header.Get(wire.HeaderDestination), ConsumerName: req.Header.Get(wire.HeaderConsumer),
		EventID: req.Header.Get(wire.HeaderEventID), AttemptID: req.Header.Get(wire.HeaderAttemptID), AttemptNumber: an,
		ExpectedReceiptType: req.Header.Get(wire.HeaderReceiptType), ExpectedReceiptSchemaVersion: sv,
		Envelope: body, EnvelopeDigestAlgorithmVersion: canon.Algorithm, EnvelopeSHA256: req.Header.Get(wire.HeaderEnvelopeSHA256),
	}
	if p := req.Header.Get(wire.HeaderProjection); p != "" {
		name, ver, _ := strings.Cut(p, "@")
		d.RequiredProjectionName = name
		d.RequiredProjectionVersion, _ = strconv.Atoi(ver)
	}
	// A real consumer verifies the digest of what it received.
	if sum, err := canon.SHA256Hex(body); err != nil || sum != d.EnvelopeSHA256 {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"code":"digest_conflict"}`))
		return
	}
	n := c.begin(d)
	r := c.script(n, d)
	if r.sleep > 0 {
		select {
		case <-time.After(r.sleep):
		case <-req.Context().Done():
			return
		}
	}
	if r.Wait != nil {
		select {
		case <-r.Wait:
		case <-req.Context().Done():
			return
		}
	}
	switch r.Kind {
	case "ack":
		ack, rc, err := Answer(d)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		c.markApplied(d.EventID)
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(wire.HTTPSuccessBody{Ack: ack, Receipt: rc})
		_, _ = w.Write(b)
	case "status":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(r.Code)
		_, _ = w.Write([]byte(r.Body))
	case "block":
		<-req.Context().Done()
	default:
		w.WriteHeader(500)
	}
}

// HTTPConsumer serves c on loopback and returns the HMAC-authenticated HTTP transport to it.
func HTTPConsumer(t *testing.T, c *Consumer, timeout time.Duration) (*httptest.Server, transport.Transport) {
	t.Helper()
	c.secret = []byte(Secret)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	h, err := transport.NewHTTP(transport.HTTPOptions{URL: srv.URL + "/deliver", Timeout: timeout, Auth: config.AuthHMAC,
		Secret: config.NewSecret([]byte(Secret))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return srv, h
}

// HTTPDest is an HMAC-signed HTTP destination at url with Secret.
func HTTPDest(url string) config.Destination {
	return config.Destination{Transport: config.TransportHTTP, URL: url, Timeout: 10 * time.Second, Auth: config.AuthHMAC,
		Secret: config.NewSecret([]byte(Secret)), SecretEnv: "X", MaxResponseBytes: 1 << 20}
}

// DatabaseURL creates a fresh migrated database (testdb.URL) and returns its URL.
func DatabaseURL(t *testing.T) string { t.Helper(); return testdb.URL(t) }

// Pool opens a pool from pc, closed at test end.
func Pool(t *testing.T, pc *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
