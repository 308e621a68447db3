//go:build bench

// Command outboxbench is the pgoutbox side of the side-by-side comparison with River of SPEC
// §12a P-1, P-2, P-3 and P-6 (River's side: bench/river, a module of its own). `make bench-river`
// runs both, alternating, on the same cluster in the same run; see scripts/bench-river.sh.
//
// It drives the kernel through its public SQL API the way River's own benchmark drives River,
// with what a dispatcher would do in Go and nothing else. Modes p1, p2, p3, p3c and p6. Every
// run drops and recreates its own database (default pgoutbox_bench_sbs) on the cluster of
// -server and prints one RESULT line, then the per-statement budget (HP-6, budget.go).
//
// What each mode does and how the rate is taken: docs/benchmarks.md#outboxbench-benchoutboxbench.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// The event type whose one (mandatory) member is the destination below, in the reference release.
const (
	eventType   = "execution.attempt-eligibility.finalized@1"
	eventSchema = "1"
	destination = "metering_input_processor"
	receiptKind = reference.MeteringInputProcessorKind
)

// receipts is the receipt catalog of the bench database (receipt.LoadCatalog), loaded once the
// database is migrated.
var receipts *receipt.Catalog

type options struct {
	server, dbName, mode string
	n, payload           int
	workers, batch       int
	producers, txSize    int
	lease, poll, timeout time.Duration
	keep                 bool
	top                  int
	budget               bool
	// p3 / p3c
	concurrency, prefetch, dbConns, consumerConns int
	cpuProfile                                    string
	dispatcherBin                                 string
	flush                                         time.Duration
	// scale curve (SPEC R-DP-9): destinations per event (p1/p2) and a label for the RESULT line
	destinations int
	label        string
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", os.Getenv("DATABASE_URL"), "superuser URL of the cluster's maintenance database")
	flag.StringVar(&o.dbName, "db", "pgoutbox_bench_sbs", "database to (re)create and migrate")
	flag.StringVar(&o.mode, "mode", "p1", "p1 (pre-appended backlog), p2 (producers appending concurrently), p6 (appends only), p3 or p3c (end to end over HTTP: dispatcher + consumer kit; backlog / concurrent appends), ceiling (P-8: the bare write set of a delivery's life in plain SQL, no checks)")
	flag.IntVar(&o.n, "n", 5000, "events (one delivery per destination each)")
	flag.IntVar(&o.destinations, "destinations", 1, "p1/p2: mandatory destinations per event (1: the reference release's metering_input_processor; N > 1 adds N-1 destinations of the same kind, so each event has N deliveries)")
	flag.StringVar(&o.label, "label", "", "a label=… key on the RESULT line (scripts/bench-river.sh: curve, for the scale curve's runs, kept apart from the P-1 figures)")
	flag.IntVar(&o.payload, "payload", 400, "size in bytes of each event's payload object (River comparison: 400; product's usual: 1024)")
	flag.IntVar(&o.workers, "workers", 2, "dispatcher worker connections")
	flag.IntVar(&o.batch, "batch", 100, "claim batch size")
	flag.IntVar(&o.producers, "producers", 2, "producer connections (p2; also used to append the p1 backlog)")
	flag.IntVar(&o.txSize, "tx", 100, "events per producer transaction")
	flag.DurationVar(&o.lease, "lease", time.Minute, "claim lease")
	flag.DurationVar(&o.poll, "poll", 20*time.Millisecond, "wait after an empty claim while producers run (River's FetchPollInterval in its benchmark)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the database afterwards")
	flag.BoolVar(&o.budget, "budget", true, "collect the per-statement budget (false: pg_stat_statements.track and track_functions off in the bench database, to see their overhead)")
	flag.IntVar(&o.top, "top", 15, "STMT and FUNC lines of the budget (top statements by total time, functions by self time)")
	flag.IntVar(&o.concurrency, "concurrency", 64, "p3/p3c: the dispatcher's concurrency (HTTP requests in flight)")
	flag.IntVar(&o.prefetch, "prefetch", 100, "p3/p3c: the dispatcher's prefetch (deliveries claimed ahead)")
	flag.IntVar(&o.dbConns, "db-conns", 16, "p3/p3c: the dispatcher's db_max_conns")
	flag.IntVar(&o.consumerConns, "consumer-conns", 16, "p3/p3c: connections of the consumer kit's pool")
	flag.DurationVar(&o.flush, "flush", 2*time.Millisecond, "p3/p3c: the dispatcher's outcome_flush_interval")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "p3/p3c: write a Go CPU profile of the measured phase of this process (the consumer kit and its HTTP server; the dispatcher is its own process) to this file")
	flag.StringVar(&o.dispatcherBin, "dispatcher", "", "p3/p3c: the dispatcher binary (cmd/dispatcher); default: bin/dispatcher next to this binary, else dispatcher on PATH")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	line, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxbench:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// payload returns a JSON object of exactly size bytes (when size allows), the same shape as
// River's job args in bench/river.
func payload(num, size int) json.RawMessage {
	overhead := len(`{"num":` + strconv.Itoa(num) + `,"pad":""}`)
	return json.RawMessage(`{"num":` + strconv.Itoa(num) + `,"pad":"` + strings.Repeat("x", max(0, size-overhead)) + `"}`)
}

func event(i, size int) producer.Event {
	s := strconv.Itoa(i)
	return producer.Event{
		EventType: eventType, EventSchemaVersion: eventSchema,
		AggregateID: "sbs-" + s, AggregateRevision: 1,
		Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "tenant-1", WorkspaceID: "workspace-1"},
		CorrelationID: "corr-" + s, OperationID: "op-" + s, CausationID: "cause-" + s,
		Payload: payload(i, size),
	}
}

func connect(ctx context.Context, dsn, role string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func run(ctx context.Context, o options) (string, error) {
	if o.server == "" {
		return "", errors.New("-server (or DATABASE_URL) is required")
	}
	switch o.mode {
	case "p1", "p2", "p6", "p3", "p3c", "ceiling":
	default:
		return "", fmt.Errorf("unknown -mode %q (p1, p2, p6, p3, p3c or ceiling)", o.mode)
	}
	if o.destinations < 1 || (o.destinations > 1 && o.mode != "p1" && o.mode != "p2") {
		return "", fmt.Errorf("-destinations %d: at least 1, and more than 1 only in modes p1 and p2", o.destinations)
	}
	if strings.ContainsAny(o.label, " =\t\n") {
		return "", fmt.Errorf("-label %q: no spaces or '='", o.label)
	}
	dests := destinationNames(o.destinations)
	dsn, err := reference.FreshDatabase(ctx, o.server, o.dbName)
	if err != nil {
		return "", err
	}
	if !o.keep {
		defer func() { _ = migrate.DropDatabase(context.Background(), o.server, o.dbName) }()
	}
	if err := loadReceipts(ctx, dsn); err != nil {
		return "", err
	}
	if err := selfCheck(); err != nil {
		return "", err
	}
	if !o.budget { // before any session of the bench database starts
		if err := statsOff(ctx, o.server, o.dbName); err != nil {
			return "", err
		}
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer admin.Close(context.Background())
	if o.mode == "ceiling" { // plain SQL in a schema of its own; no kernel function runs
		return ceiling(ctx, admin, dsn, o)
	}
	if err := activateRelease(ctx, dsn, dests); err != nil {
		return "", err
	}

	prods := make([]*pgx.Conn, o.producers)
	for i := range prods {
		if prods[i], err = connect(ctx, dsn, "outbox_producer"); err != nil {
			return "", err
		}
		defer prods[i].Close(context.Background())
	}
	if o.mode == "p6" {
		return appendOnly(ctx, admin, prods, o)
	}
	if o.mode == "p3" || o.mode == "p3c" {
		return runP3(ctx, o, dsn, admin, prods)
	}
	disps := make([]*pgx.Conn, o.workers)
	for i := range disps {
		if disps[i], err = connect(ctx, dsn, "outbox_dispatcher"); err != nil {
			return "", err
		}
		defer disps[i].Close(context.Background())
	}

	if o.mode == "p1" {
		if _, err := appendAll(ctx, prods, o); err != nil {
			return "", fmt.Errorf("backlog: %w", err)
		}
		for _, t := range []string{"outbox.outbox_events", "outbox.outbox_deliveries"} {
			if _, err := admin.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
				return "", err
			}
		}
	}

	var (
		producing atomic.Bool
		appendDur time.Duration
		prodErr   error
		prodDone  = make(chan struct{})
	)
	// The measured phase starts here: pg_stat_statements reset, function counts and WAL position
	// taken (HP-6, P-4).
	bud, err := startBudget(ctx, admin, append(append([]*pgx.Conn(nil), prods...), disps...))
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	var (
		claimMu   sync.Mutex
		claimFull []float64 // ms of each claim that returned a full batch
		claimAny  []float64 // ms of each claim that returned anything
	)
	timedClaim := func(d time.Duration, n int) {
		claimMu.Lock()
		defer claimMu.Unlock()
		ms := float64(d) / float64(time.Millisecond)
		if n > 0 {
			claimAny = append(claimAny, ms)
		}
		if n == o.batch {
			claimFull = append(claimFull, ms)
		}
	}
	wctx, wcancel := context.WithCancel(ctx) // a failing worker stops producers and workers alike
	defer wcancel()
	start := time.Now()
	if o.mode == "p2" {
		producing.Store(true)
		go func() {
			defer close(prodDone)
			appendDur, prodErr = appendAll(wctx, prods, o)
			producing.Store(false)
		}()
	} else {
		close(prodDone)
	}

	var (
		acked, published atomic.Int64
		lastAck          atomic.Int64 // unix nanoseconds of the latest ack
		wg               sync.WaitGroup
		errOnce          sync.Once
		workErr          error
	)
	for w, conn := range disps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := work(wctx, conn, "sbs-"+strconv.Itoa(w), dests, o, &producing, timedClaim, func(outs []itemOutcome) error {
				for _, r := range outs {
					switch r.Outcome {
					case "complete":
						published.Add(1)
					case "not_complete":
					default:
						return fmt.Errorf("ack %s/%s: %s %s %s", r.Destination, r.EventID, r.Outcome, r.SQLState, r.Detail)
					}
				}
				acked.Add(int64(len(outs)))
				lastAck.Store(time.Now().UnixNano())
				return nil
			})
			if err != nil {
				errOnce.Do(func() { workErr = err; wcancel() })
			}
		}()
	}
	<-prodDone
	if prodErr != nil {
		wcancel()
	}
	wg.Wait()
	switch {
	case prodErr != nil && !errors.Is(prodErr, context.Canceled):
		return "", fmt.Errorf("producers: %w", prodErr)
	case workErr != nil: // the first failure (a producer canceled by it reports context.Canceled)
		return "", workErr
	case prodErr != nil:
		return "", fmt.Errorf("producers: %w", prodErr)
	}
	elapsed := time.Unix(0, lastAck.Load()).Sub(start)
	walPerEvent, budgetLines, err := bud.finish(ctx, admin, append(append([]*pgx.Conn(nil), prods...), disps...), o.mode, o.n, o.top)
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	if !o.budget {
		budgetLines = nil
	}

	var sum pgcall.PublicationSummary
	if _, err := admin.Exec(ctx, "SET ROLE outbox_auditor"); err != nil {
		return "", err
	}
	if sum, err = pgcall.ReadPublicationSummary(ctx, admin); err != nil {
		return "", err
	}
	if sum.Events != int64(o.n) || sum.Published != int64(o.n) || sum.FullyAcked != int64(o.n) || sum.NonTerminal != 0 ||
		sum.OpenAttempts != 0 || acked.Load() != int64(o.n*len(dests)) {
		return "", fmt.Errorf("incomplete run: %+v, acked %d, want %d events of %d deliveries", sum, acked.Load(), o.n, len(dests))
	}
	// events published per second: with one destination the acks that completed (as before);
	// with several, every ack's outcome is "complete", so the n events (all published, checked
	// above) over the same time
	pubRate := rate(published.Load(), elapsed)
	if len(dests) > 1 {
		pubRate = rate(int64(o.n), elapsed)
	}
	kv := []string{
		"deliveries_per_sec=" + rate(acked.Load(), elapsed),
		"events_published_per_sec=" + pubRate,
		"events=" + strconv.Itoa(o.n),
		"elapsed_s=" + strconv.FormatFloat(elapsed.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"destinations=" + strconv.Itoa(len(dests)),
		"workers=" + strconv.Itoa(o.workers),
		"batch=" + strconv.Itoa(o.batch),
		"ack=" + ackMode,
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
		// P-4: WAL of the measured phase (p1: dispatch only; p2: appends and dispatch) per event
		"wal_bytes_per_event=" + strconv.FormatFloat(walPerEvent, 'f', 0, 64),
		// claim of -batch: median wall time in Go of the claims that returned a full batch
		"claim_ms_p50=" + strconv.FormatFloat(median(claimFull), 'f', 2, 64),
		"claim_full_calls=" + strconv.Itoa(len(claimFull)),
		"claim_any_ms_p50=" + strconv.FormatFloat(median(claimAny), 'f', 2, 64),
		"budget=" + strconv.FormatBool(o.budget),
	}
	if o.mode == "p2" {
		kv = append(kv, "producers="+strconv.Itoa(o.producers), "tx_size="+strconv.Itoa(o.txSize),
			"appended_per_sec="+rate(int64(o.n), appendDur))
	}
	if o.label != "" {
		kv = append(kv, "label="+o.label)
	}
	return strings.Join(append([]string{"RESULT pgoutbox " + o.mode + " " + strings.Join(kv, " ")}, budgetLines...), "\n"), nil
}

// appendOnly is -mode p6: the n events appended in transactions of o.txSize over the producer
// connections (producer.AppendMany, one outbox.append_events call per transaction), timed from
// the first transaction's start to the last commit; the stored events are counted afterwards.
func appendOnly(ctx context.Context, admin *pgx.Conn, prods []*pgx.Conn, o options) (string, error) {
	dur, err := appendAll(ctx, prods, o)
	if err != nil {
		return "", fmt.Errorf("producers: %w", err)
	}
	var events, deliveries int64
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox.outbox_events), (SELECT count(*) FROM outbox.outbox_deliveries)`).
		Scan(&events, &deliveries); err != nil {
		return "", err
	}
	if events != int64(o.n) || deliveries != int64(o.n) {
		return "", fmt.Errorf("incomplete run: %d events, %d deliveries, want %d", events, deliveries, o.n)
	}
	kv := []string{
		"appended_per_sec=" + rate(int64(o.n), dur),
		"events=" + strconv.Itoa(o.n),
		"elapsed_s=" + strconv.FormatFloat(dur.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"producers=" + strconv.Itoa(o.producers),
		"tx_size=" + strconv.Itoa(o.txSize),
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
	}
	return "RESULT pgoutbox p6 " + strings.Join(kv, " "), nil
}

func rate(n int64, d time.Duration) string {
	return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 1, 64)
}

// activateReference registers and activates the reference release as outbox_registrar.
func activateReference(ctx context.Context, dsn string) error {
	conn, err := connect(ctx, dsn, "outbox_registrar")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	doc, err := reference.LoadRelease()
	if err != nil {
		return err
	}
	q, err := pgcall.RegisterDeliverySet(ctx, conn, doc, "oceanway-first-release")
	if err != nil {
		return err
	}
	return pgcall.ActivateDeliverySet(ctx, conn, q)
}

// appendAll appends events 1..n through the producer library (D-2 hot path, AppendMany: one
// append_events call per transaction), split over the producer connections, in transactions of
// o.txSize, and returns how long it took.
func appendAll(ctx context.Context, prods []*pgx.Conn, o options) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64 // next transaction's first event, claimed by whichever producer is free
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for _, conn := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(int64(o.txSize))) - o.txSize
				if from >= o.n || ctx.Err() != nil {
					return
				}
				// One outbox.append_events call per transaction (producer.AppendMany, D-2 hot path).
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					evs := make([]producer.Event, 0, o.txSize)
					for i := from; i < min(o.n, from+o.txSize); i++ {
						evs = append(evs, event(i+1, o.payload))
					}
					_, err := producer.AppendMany(ctx, tx, evs)
					return err
				})
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// work is one dispatcher worker: claim a batch, build each delivery's receipt and ack in Go,
// acknowledge the batch, until nothing is left to claim and no producer is running.
func work(ctx context.Context, conn *pgx.Conn, worker string, dests []string, o options, producing *atomic.Bool,
	timed func(time.Duration, int), done func([]itemOutcome) error) error {
	for {
		running := producing.Load() // read before the claim: an empty claim after the producers finished ends the worker
		t0 := time.Now()
		cs, err := pgcall.ClaimDeliveries(ctx, conn, pgcall.ClaimParams{Worker: worker, Destinations: dests,
			BatchSize: o.batch, Lease: o.lease})
		if err != nil {
			return err
		}
		timed(time.Since(t0), len(cs))
		if len(cs) == 0 {
			if !running {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.poll):
			}
			continue
		}
		items := make([]ackItem, len(cs))
		for i, c := range cs {
			if items[i], err = buildAck(c); err != nil {
				return err
			}
		}
		outs, err := ackBatch(ctx, conn, items)
		if err != nil {
			return err
		}
		if err := done(outs); err != nil {
			return err
		}
	}
}

type ackItem = pgcall.AckItem
type itemOutcome = pgcall.ItemOutcome

// ackMode names the ack path in the RESULT line, so reports say which one was measured.
const ackMode = "ack_deliveries"

// ackBatch acknowledges one claimed batch with ONE call of outbox.ack_deliveries, typed form (one
// transaction, per-item outcomes, the receipt digest candidates passed: the D-2 hot path) and
// returns one outcome per item, in input order: complete | not_complete | rejected.
func ackBatch(ctx context.Context, db pgcall.DBTX, items []ackItem) ([]itemOutcome, error) {
	return pgcall.AckDeliveriesTyped(ctx, db, items)
}

// buildAck builds, for one claimed delivery, the receipt a correct consumer would write and
// its ActiveConsumerAck@1, with the receipt package (what a dispatcher whose consumer answers
// in Go has in hand), plus the receipt's digest candidate text.
func buildAck(c pgcall.ClaimedDelivery) (ackItem, error) {
	doc, err := receipts.Build(receiptKind, receipt.Params{
		Destination: c.Destination, ConsumerName: c.ConsumerName, EventID: c.EventID,
		EventEnvelopeSHA256: c.EventEnvelopeSHA256,
	})
	if err != nil {
		return ackItem{}, err
	}
	cand, err := candidateText(doc)
	if err != nil {
		return ackItem{}, err
	}
	return ackItem{
		Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken},
		Ack:   doc.Ack, Receipt: doc.Receipt, ReceiptDigestCandidate: cand,
	}, nil
}

// candidateText returns the canonical text of the receipt's digest candidate: the document
// minus <prefix>Ref, <prefix>Digest and the time field (receipt package doc comment).
func candidateText(d receipt.Document) (string, error) {
	info, _ := receipts.Lookup(d.Kind)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Receipt, &m); err != nil {
		return "", err
	}
	delete(m, info.RefField())
	delete(m, info.DigestField())
	delete(m, info.TimeField)
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	c, err := canon.Canonicalize(b)
	return string(c), err
}

// loadReceipts loads the receipt catalog of the database at dsn.
func loadReceipts(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	receipts, err = receipt.LoadCatalog(ctx, conn)
	return err
}

// selfCheck verifies once that candidateText hashes to the digest the receipt package computed.
func selfCheck() error {
	doc, err := receipts.Build(receiptKind, receipt.Params{Destination: destination, ConsumerName: "metering_input_processor_consumer",
		EventID: "00000000-0000-4000-8000-000000000001", EventEnvelopeSHA256: strings.Repeat("ab", 32)})
	if err != nil {
		return err
	}
	cand, err := candidateText(doc)
	if err != nil {
		return err
	}
	if d := canon.SumHex([]byte(cand)); d != doc.Digest {
		return fmt.Errorf("self-check: candidate digest %s, receipt digest %s", d, doc.Digest)
	}
	return nil
}
