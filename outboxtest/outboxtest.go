// Package outboxtest is the test kit for programs built on pgoutbox, like River's rivertest: a
// throw-away migrated database per test (cloned from a pgtestdb template of the kernel's
// migrations), a release registered and activated from its definition, appends inside a
// transaction, and one dispatch round through the real dispatcher against in-process consumers,
// with what each destination received and what was published.
//
// The database cluster is DATABASE_URL's (a superuser connection to its maintenance database;
// `make db-up` in this repository starts one). A typical test:
//
//	db := outboxtest.New(t)
//	db.Exec(t, registerSQL)                     // receipt kinds and destinations
//	db.ActivateReleaseFile(t, "release.json")   // the delivery set
//	ids := db.Append(t, producer.Event{EventType: "order.placed@1", …})
//	round := db.Dispatch(t, map[string]wire.Consumer{"order_email": emailKit, …})
//	round.Received("order_email")               // the deliveries that destination got
//	db.Published(t, ids[0])                     // every mandatory delivery acknowledged
//
// Walk-through: docs/getting-started.md, "Testing your release".
package outboxtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// DB is one test's throw-away database with the kernel installed (no release, no destination).
type DB struct {
	// URL connects to the database as a superuser.
	URL string
	// Pool is a superuser pool on URL, closed when the test ends.
	Pool *pgxpool.Pool
}

// New creates a fresh database with the kernel's migrations (a clone of a template migrated
// once per cluster) that is dropped when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	url := testdb.KernelURL(t)
	return &DB{URL: url, Pool: testdb.Pool(t, url)}
}

// Exec runs a SQL script (several statements; e.g. a release's register.sql, which switches to
// outbox_registrar itself) as a superuser, and fails the test on any error.
func (db *DB) Exec(t testing.TB, script string) {
	t.Helper()
	conn := testdb.Conn(t, db.URL, "")
	if _, err := conn.Exec(context.Background(), script); err != nil {
		t.Fatalf("outboxtest: exec: %v", err)
	}
}

// ActivateRelease registers the delivery-set definition (a DeliverySetDefinition document, as in
// a release.json) as outbox_registrar and activates it, exactly as `outboxctl release activate`
// does.
func (db *DB) ActivateRelease(t testing.TB, definition json.RawMessage, source string) {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Conn(t, db.URL, "outbox_registrar")
	q, err := pgcall.RegisterDeliverySet(ctx, conn, definition, source)
	if err != nil {
		t.Fatalf("outboxtest: register delivery set: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, conn, q); err != nil {
		t.Fatalf("outboxtest: activate delivery set: %v", err)
	}
}

// ActivateReleaseFile is ActivateRelease on the definition in the file at path.
func (db *DB) ActivateReleaseFile(t testing.TB, path string) {
	t.Helper()
	doc, err := release.LoadFile(path)
	if err != nil {
		t.Fatalf("outboxtest: %v", err)
	}
	db.ActivateRelease(t, doc, path)
}

// Append appends the events in one transaction as outbox_producer (producer.Append, the way a
// producer appends inside its business transaction) and returns their event ids in order.
func (db *DB) Append(t testing.TB, events ...producer.Event) []string {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Conn(t, db.URL, "outbox_producer")
	ids := make([]string, 0, len(events))
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, ev := range events {
			r, err := producer.Append(ctx, tx, ev)
			if err != nil {
				return err
			}
			ids = append(ids, r.EventID)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("outboxtest: append: %v", err)
	}
	return ids
}

// Status is the state of the delivery of eventID to destination (pending, leased,
// acknowledged, quarantined, …).
func (db *DB) Status(t testing.TB, destination, eventID string) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT status FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`, destination, eventID).Scan(&s); err != nil {
		t.Fatalf("outboxtest: delivery status: %v", err)
	}
	return s
}

// Published reports whether the event was published (every mandatory delivery acknowledged).
func (db *DB) Published(t testing.TB, eventID string) bool {
	t.Helper()
	var ok bool
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT FROM outbox.outbox_publications WHERE event_id = $1::uuid)`, eventID).Scan(&ok); err != nil {
		t.Fatalf("outboxtest: publication: %v", err)
	}
	return ok
}

// Round is what one dispatch round did.
type Round struct {
	mu       sync.Mutex
	received map[string][]wire.Delivery
	answers  map[string][]wire.Result
}

// Received returns the deliveries destination received in the round, in order.
func (r *Round) Received(destination string) []wire.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Delivery(nil), r.received[destination]...)
}

// Answers returns what destination's consumer answered, parallel to Received.
func (r *Round) Answers(destination string) []wire.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Result(nil), r.answers[destination]...)
}

// DispatchOptions tune Dispatch; the zero value suits most tests.
type DispatchOptions struct {
	// Transports are the program's own transports, by destination, used instead of an
	// in-process consumer (a custom transport under test).
	Transports map[string]transport.Transport
	// Timeout bounds the round (default 60 s); it only keeps a broken test from hanging.
	Timeout time.Duration
	// Log receives the dispatcher's log (default: discarded; os.Stderr is useful when
	// debugging).
	Log io.Writer
}

// Dispatch runs one dispatch round with the real dispatcher (as outbox_dispatcher) against
// consumers (in-process, by destination) and the transports of o: it runs until no delivery of
// those destinations is pending or leased (each acknowledged or quarantined; a retry waits for
// its backoff inside the round), then drains and returns what each destination received.
func (db *DB) Dispatch(t testing.TB, consumers map[string]wire.Consumer, o ...DispatchOptions) *Round {
	t.Helper()
	var opt DispatchOptions
	if len(o) > 0 {
		opt = o[0]
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	round := &Round{received: map[string][]wire.Delivery{}, answers: map[string][]wire.Result{}}
	cfg := dispatcher.DefaultConfig()
	cfg.Mode = config.ModeDevelopment
	cfg.WorkerName = "outboxtest"
	cfg.DatabaseRole = "outbox_dispatcher"
	cfg.PollInterval = 50 * time.Millisecond
	cfg.RecoveryInterval = 200 * time.Millisecond
	cfg.MetricsAddress = "127.0.0.1:0"
	cfg.Destinations = map[string]config.Destination{}
	trs := map[string]transport.Transport{}
	record := func(dest string, next transport.Transport) transport.Transport {
		return &recording{next: next, dest: dest, round: round}
	}
	for dest, c := range consumers {
		cfg.Destinations[dest] = config.Destination{Transport: config.TransportInProcess, Auth: config.AuthNone}
		trs[dest] = record(dest, transport.NewInProcess(map[string]wire.Consumer{dest: c}))
	}
	for dest, tr := range opt.Transports {
		cfg.Destinations[dest] = config.Destination{Transport: config.TransportCustom, Auth: config.AuthNone}
		trs[dest] = record(dest, tr)
		if b, ok := tr.(transport.ReceiptBuilder); ok { // keep what the transport says it builds
			trs[dest] = recordingBuilder{recording: &recording{next: tr, dest: dest, round: round}, kind: b.ReceiptKind()}
		}
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("outboxtest: dispatcher config: %v", errs)
	}
	pc, err := dispatcher.PoolConfig(&cfg, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatalf("outboxtest: %v", err)
	}
	defer pool.Close()
	d, err := dispatcher.New(pool, &cfg, dispatcher.Options{Transports: trs, Logger: slog.New(slog.NewJSONHandler(opt.Log, nil))})
	if err != nil {
		t.Fatalf("outboxtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opt.Timeout)
	defer cancel()
	if err := d.Preflight(ctx); err != nil {
		t.Fatalf("outboxtest: dispatcher preflight: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	for {
		stats, err := pgcall.DeliveryStats(ctx, db.Pool)
		if err != nil {
			stop()
			<-done
			t.Fatalf("outboxtest: delivery stats: %v", err)
		}
		var open int64
		for _, s := range stats {
			if trs[s.Destination] != nil {
				open += s.Pending + s.Leased
			}
		}
		if open == 0 {
			break
		}
		select {
		case <-ctx.Done():
			stop()
			<-done
			t.Fatalf("outboxtest: dispatch round: %d deliveries still open after %s", open, opt.Timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("outboxtest: dispatcher: %v", err)
	}
	return round
}

// recording passes deliveries to next and records them and their answers in round; it hands
// next what the dispatcher loads at preflight (transport.Prepare).
type recording struct {
	next  transport.Transport
	dest  string
	round *Round
}

func (r *recording) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	res, err := r.next.Deliver(ctx, d)
	r.round.mu.Lock()
	r.round.received[r.dest] = append(r.round.received[r.dest], d)
	r.round.answers[r.dest] = append(r.round.answers[r.dest], res)
	r.round.mu.Unlock()
	return res, err
}

func (r *recording) Close() error { return r.next.Close() }

func (r *recording) SetCodes(c *transport.Codes) {
	if u, ok := r.next.(transport.CodesUser); ok {
		u.SetCodes(c)
	}
}

func (r *recording) SetReceiptCatalog(c *receipt.Catalog) {
	if u, ok := r.next.(transport.ReceiptCatalogUser); ok {
		u.SetReceiptCatalog(c)
	}
}

// recordingBuilder is a recording of a transport that builds its receipts itself
// (transport.ReceiptBuilder): it keeps saying so.
type recordingBuilder struct {
	*recording
	kind string
}

func (b recordingBuilder) ReceiptKind() string { return b.kind }
