package tests

// Issue 21 item 2: a Mutate consumer costs one database round trip per delivery, on the success
// path and on a redelivery, with the same guarantees as the Apply path (R-CO-1..3).

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// tripConn counts round trips on one connection: a read that follows a write is the client
// waiting for the server's answer to what it sent.
type tripConn struct {
	net.Conn
	wrote atomic.Bool
	trips *atomic.Int64
}

func (c *tripConn) Write(p []byte) (int, error) { c.wrote.Store(true); return c.Conn.Write(p) }

func (c *tripConn) Read(p []byte) (int, error) {
	if c.wrote.Swap(false) {
		c.trips.Add(1)
	}
	return c.Conn.Read(p)
}

// tripPool is a one-connection pool on dsn whose round trips are counted in trips.
func tripPool(t *testing.T, dsn string, trips *atomic.Int64) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	var d net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tripConn{Conn: c, trips: trips}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool
}

func (b *ckBundle) mutateKit(t *testing.T, pool *pgxpool.Pool, name string, edit func(*consumer.Config)) *consumer.Consumer {
	t.Helper()
	spec := ckSpec(t, name)
	if !spec.OneRoundTrip() {
		t.Fatalf("%s has no Mutate form", name)
	}
	cfg := spec.MutateConfig(pool)
	cfg.Role = ckRole
	if edit != nil {
		edit(&cfg)
	}
	c, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// One round trip per new delivery and per redelivery (counted on the wire, warm connection:
// pgx prepares a statement once per connection), against 10 for the Apply path; the receipt,
// the two domain rows and the stored receipt on redelivery are as with Apply.
func TestConsumerOneRoundTripPerDelivery(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	var trips atomic.Int64
	pool := tripPool(t, b.dsn, &trips)
	kit := b.mutateKit(t, pool, spec.ConsumerName, nil)
	applyKit := b.kit(t, spec.ConsumerName, func(c *consumer.Config) { c.Pool = pool })

	count := func(k *consumer.Consumer, d wire.Delivery) (wire.Result, int64) {
		before := trips.Load()
		r := ckDeliver(t, k, d)
		return r, trips.Load() - before
	}
	warm := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-warm", 1))
	ckWantAck(t, ckDeliver(t, kit, warm))
	ckWantAck(t, ckDeliver(t, applyKit, ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-warm2", 1))))

	d := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-1rt", 1))
	first, n := count(kit, d)
	ckWantAck(t, first)
	if n != 1 {
		t.Fatalf("new delivery: %d round trips, want 1", n)
	}
	again, n := count(kit, d)
	ckWantAck(t, again)
	if n != 1 {
		t.Fatalf("redelivery: %d round trips, want 1", n)
	}
	if !bytes.Equal(again.Receipt, first.Receipt) {
		t.Fatalf("redelivery answered another receipt")
	}
	if e := ckEffects(t, b.pool, spec, d.EventID); e != 1 {
		t.Fatalf("applied %d times, want 1", e)
	}
	if r := ckReceipts(t, b.pool, spec.ConsumerName, d.EventID); r != 1 {
		t.Fatalf("%d receipts, want 1", r)
	}
	if n := ckCount(t, b.pool, `SELECT count(*) FROM refconsumer_metering_input.received_events WHERE event_id = $1::uuid`, d.EventID); n != 1 {
		t.Fatalf("received_events rows %d, want 1", n)
	}
	// The Apply path for comparison: begin, set role, read_receipt, two statements,
	// record_receipt, commit (10 on the wire with pgx v5.12: some steps take two exchanges).
	res, n := count(applyKit, ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-apply", 1)))
	ckWantAck(t, res)
	if n < 7 {
		t.Fatalf("Apply path: %d round trips, expected at least its 7 steps", n)
	}
	t.Logf("round trips per new delivery: Mutate 1, Apply %d", n)
}

// R-CO-2 on the one-round-trip chain: a statement of the handler that fails rolls back the
// receipt and every other statement (retryable database_unavailable, nothing kept, the
// redelivery applies once); an event id reused with another envelope is receipt_conflict and
// applies nothing; a Mutate error answers its classification and sends nothing.
func TestConsumerOneRoundTripAtomicity(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	var failing atomic.Bool
	failing.Store(true)
	kit := b.mutateKit(t, b.pool, spec.ConsumerName, func(c *consumer.Config) {
		inner := c.Mutate
		c.Mutate = func(ev consumer.Event, q *consumer.Queue) (consumer.ReceiptFields, error) {
			f, err := inner(ev, q)
			if failing.Load() {
				q.Exec(`SELECT 1 / 0`) // after both writes
			}
			return f, err
		}
	})
	env := ckEnv(reference.ExecutionAttemptEligibility, "attempt-atom", 1)
	d := ckDelivery(t, spec, env)
	ckWant(t, ckDeliver(t, kit, d), wire.Retryable, consumer.CodeDatabaseUnavailable)
	if e, r := ckEffects(t, b.pool, spec, d.EventID), ckReceipts(t, b.pool, spec.ConsumerName, d.EventID); e != 0 || r != 0 {
		t.Fatalf("failed chain kept effects %d / receipts %d", e, r)
	}
	failing.Store(false)
	ckWantAck(t, ckDeliver(t, kit, d))
	if e := ckEffects(t, b.pool, spec, d.EventID); e != 1 {
		t.Fatalf("applied %d times", e)
	}
	env["payload"] = map[string]any{"other": "content"}
	ckWant(t, ckDeliver(t, kit, ckDelivery(t, spec, env)), wire.NonRetryable, consumer.CodeReceiptConflict)
	if e := ckEffects(t, b.pool, spec, d.EventID); e != 1 {
		t.Fatalf("a receipt conflict applied: %d", e)
	}

	rejecting := b.mutateKit(t, b.pool, spec.ConsumerName, func(c *consumer.Config) {
		c.Mutate = func(consumer.Event, *consumer.Queue) (consumer.ReceiptFields, error) {
			return nil, consumer.Reject(consumer.CodeConsumerRejected, "test", nil)
		}
	})
	d2 := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-rej", 1))
	ckWant(t, ckDeliver(t, rejecting, d2), wire.NonRetryable, consumer.CodeConsumerRejected)
	if r := ckReceipts(t, b.pool, spec.ConsumerName, d2.EventID); r != 0 {
		t.Fatalf("a rejected delivery wrote a receipt")
	}
}

// R-CO-3 on the one-round-trip chain (an ordered Mutate consumer): revision 2 before 1 is
// awaiting_revision with the gap recorded and nothing else; 1 then 2 apply; a redelivered 1 is
// its stored receipt; another event claiming an applied revision is consumer_rejected.
func TestConsumerOneRoundTripOrdered(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	kit := b.mutateKit(t, b.pool, spec.ConsumerName, func(c *consumer.Config) { c.Ordered = true })
	d1 := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "agg-ord", 1))
	d2 := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "agg-ord", 2))

	ckWant(t, ckDeliver(t, kit, d2), wire.Retryable, consumer.CodeAwaitingRevision)
	if n := ckCount(t, b.pool, `SELECT count(*) FROM inbox.inbox_revision_gaps WHERE consumer_name = $1 AND aggregate_id = 'agg-ord' AND closed_at IS NULL`, spec.ConsumerName); n != 1 {
		t.Fatalf("open gaps %d, want 1", n)
	}
	if e, r := ckEffects(t, b.pool, spec, d2.EventID), ckReceipts(t, b.pool, spec.ConsumerName, d2.EventID); e != 0 || r != 0 {
		t.Fatalf("a gap applied: effects %d receipts %d", e, r)
	}
	first := ckWantAck(t, ckDeliver(t, kit, d1))
	ckWantAck(t, ckDeliver(t, kit, d2))
	if n := ckCount(t, b.pool, `SELECT count(*) FROM inbox.inbox_revision_gaps WHERE consumer_name = $1 AND aggregate_id = 'agg-ord' AND closed_at IS NULL`, spec.ConsumerName); n != 0 {
		t.Fatalf("gap still open")
	}
	again := ckWantAck(t, ckDeliver(t, kit, d1))
	if again.Digest != first.Digest {
		t.Fatalf("redelivery of revision 1 answered another receipt")
	}
	other := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "agg-ord", 2)) // new event id, revision taken
	ckWant(t, ckDeliver(t, kit, other), wire.NonRetryable, consumer.CodeConsumerRejected)
	if e := ckEffects(t, b.pool, spec, other.EventID); e != 0 {
		t.Fatalf("an event on an applied revision was applied")
	}
}

// Concurrent deliveries of one event (real connections, released together by a barrier): every
// answer is the same receipt, the event is applied once, one receipt row.
func TestConsumerOneRoundTripConcurrentSameEvent(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	kit := b.mutateKit(t, b.pool, spec.ConsumerName, nil)
	d := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-conc", 1))
	const n = 8
	results := make([]wire.Result, n)
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ready.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			results[i], _ = kit.Deliver(ctx, d)
		}(i)
	}
	ready.Wait()
	close(start)
	wg.Wait()
	var digest string
	for i, r := range results {
		doc := ckWantAck(t, r)
		if i == 0 {
			digest = doc.Digest
		} else if doc.Digest != digest {
			t.Fatalf("answer %d: another receipt", i)
		}
	}
	if e, r := ckEffects(t, b.pool, spec, d.EventID), ckReceipts(t, b.pool, spec.ConsumerName, d.EventID); e != 1 || r != 1 {
		t.Fatalf("effects %d receipts %d, want 1 and 1", e, r)
	}
}
