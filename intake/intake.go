// Package intake is the Go client a service uses to send operational observations (request
// attempts, error occurrences, …) to the pgoutbox observation intake (schema intake, SPEC §11a
// R-OB-1..R-OB-7). Observations are best-effort evidence: sending them must never slow down nor
// fail the service's own business request.
//
// The client is built from a *pgxpool.Pool whose sessions run as a registered workload role; the
// database is the only judge of a submission. Two ways to send: AcceptMany (synchronous, the
// caller gets the answers) and Send (background, bounded buffer, never blocks nor fails the
// caller). Quota rejections and transient errors are retried with the same observation ids;
// what could not be sent is reported through intake.record_send_failures (R-OB-5).
//
// Buffering, retries and metrics in detail: docs/intake.md#package-intake-go-client.
package intake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Outcomes of intake.accept_observations (SPEC R-OB-2), the values of Outcome.Outcome.
const (
	OutcomeAcceptedNew            = "accepted_new"             // stored now
	OutcomeAcceptedExisting       = "accepted_existing"        // the same submission was accepted before
	OutcomeAcceptedExistingPurged = "accepted_existing_purged" // the same, after its payload was purged
	OutcomeConflict               = "conflict"                 // OB701: the id is bound to another source or content
	OutcomeRejected               = "rejected"                 // OB201, OB702 or OB703 (SQLState says which)
)

// SQLSTATEs an Outcome carries (docs/errors.md).
const (
	SQLStateConflict           = "OB701" // conflict
	SQLStateNotCanonicalizable = "OB201" // rejected: not canonicalizable (also: body not valid JSON, answered by the client)
	SQLStateInvalid            = "OB702" // rejected: invalid for the schema or the normalization policy
	SQLStateQuota              = "OB703" // rejected: rate quota (retryable, see Outcome.RetryAfter) or body too large (final)
)

// Reasons of send failures: the reason literals reported to intake.record_send_failures and
// the values of the send_failures_total{reason} label.
const (
	ReasonQueueFull    = "queue_full"     // Send found the buffer full
	ReasonQuota        = "quota"          // still over the rate quota after MaxQuotaRetries retries
	ReasonUnavailable  = "unavailable"    // transient database errors after MaxErrorRetries retries
	ReasonNotAWorkload = "not_a_workload" // the pool's role is not a registered workload (OB704)
	ReasonError        = "error"          // any other error of the whole call
	ReasonShutdown     = "shutdown"       // Close's or Flush's context ended with the item unsent
	ReasonClosed       = "closed"         // Send after Close (counted in the metric only: nothing reports it)
)

// ErrNotAWorkload is returned (wrapped) by AcceptMany when the pool's session role is not a
// registered workload (OB704). Test with errors.Is.
var ErrNotAWorkload = pgcall.ErrNotAWorkload

var errOutcomeCount = errors.New("intake: outcome count differs from the submissions sent")

// Submission is one Submission@1 document. ObservationID is generated (a random UUID) when
// empty; SourceClaimedObservedAt is omitted when zero and is only ever kept as a claim. Body is
// the observation's JSON object, judged by the database against the registered schema.
type Submission struct {
	ObservationID            string
	ObservationType          string
	ObservationSchemaVersion int
	SourceClaimedObservedAt  time.Time
	Body                     json.RawMessage
}

// Outcome is the intake's answer for one submission (one row of intake.accept_observations).
// ObservationID is "" when the item had no readable id; AcceptedAt and the digests are set for
// the accepted outcomes only. Detail is a human-readable reason for conflicts and rejections
// (it names members, never values; do not log it with the body).
type Outcome struct {
	Outcome                 string
	ObservationID           string
	AcceptedAt              time.Time
	SubmissionPayloadSHA256 string
	AcceptedEnvelopeSHA256  string
	SQLState                string
	Detail                  string
}

// Accepted reports whether the observation is durable in the intake (accepted_new,
// accepted_existing or accepted_existing_purged).
func (o Outcome) Accepted() bool {
	return o.Outcome == OutcomeAcceptedNew || o.Outcome == OutcomeAcceptedExisting || o.Outcome == OutcomeAcceptedExistingPurged
}

// RetryAfter returns the delay the intake asks for before resubmitting an item rejected by the
// workload's rate quota (OB703 whose detail carries retryAfterSeconds=N), and false for every
// other outcome, including an OB703 for a body larger than max_body_bytes (not retryable).
func (o Outcome) RetryAfter() (time.Duration, bool) {
	if o.Outcome != OutcomeRejected || o.SQLState != SQLStateQuota {
		return 0, false
	}
	const key = "retryAfterSeconds="
	i := strings.LastIndex(o.Detail, key)
	if i < 0 {
		return 0, false
	}
	s := o.Detail[i+len(key):]
	if j := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		s = s[:j]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// Options configure a Client. The zero value is usable: every field has a default.
type Options struct {
	// BatchSize is the number of submissions per intake.accept_observations call (default 100,
	// at most 1000, the function's limit).
	BatchSize int
	// BufferSize bounds the background buffer of Send (default 10,000 submissions).
	BufferSize int
	// MaxQuotaRetries bounds how often an item rejected by the rate quota is resubmitted
	// (default 3); after that it is a send failure (reason quota).
	MaxQuotaRetries int
	// MaxErrorRetries bounds how often a batch is resubmitted after a transient error of the
	// whole call (default 5); after that its items are send failures (reason unavailable).
	MaxErrorRetries int
	// InitialBackoff and MaxBackoff shape the exponential backoff after transient errors
	// (defaults 200 ms and 30 s; the delay is drawn in [d/2, d]).
	InitialBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps a quota retryAfterSeconds the sender is willing to wait (default 60 s).
	MaxRetryAfter time.Duration
	// CallTimeout bounds every database call of the background sender and of the failure
	// reports (default 10 s).
	CallTimeout time.Duration
	// ReportInterval is how often counted send failures are reported through
	// intake.record_send_failures (default 1 minute). Flush and Close also report.
	ReportInterval time.Duration
	// Registerer receives the client's metrics; nil registers nothing (the metrics are still
	// kept). Two clients on one registerer need distinct Workload values.
	Registerer prometheus.Registerer
	// Workload, when set, is the const label workload of every metric (the workload principal
	// id, e.g. "wp-api-edge"; one value per process).
	Workload string
	// Logger receives warnings about failed calls and reports (counts, reasons and SQLSTATEs
	// only; never ids or bodies); nil is slog.Default().
	Logger *slog.Logger
	// Sleep waits for d or until ctx ends (returning ctx.Err()); nil is a timer. It is how the
	// background sender waits for a quota's retryAfterSeconds and for backoff, replaceable in
	// tests and simulations.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (o Options) withDefaults() Options {
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	if o.BatchSize > 1000 {
		o.BatchSize = 1000
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 10000
	}
	if o.MaxQuotaRetries <= 0 {
		o.MaxQuotaRetries = 3
	}
	if o.MaxErrorRetries <= 0 {
		o.MaxErrorRetries = 5
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.ReportInterval <= 0 {
		o.ReportInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	return o
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Client sends observations to the intake. It is safe for concurrent use. New starts its
// background sender; Close stops it.
type Client struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger
	m    *clientMetrics

	mu     sync.RWMutex // Send holds it shared; Close exclusively, to set closed
	closed bool
	queue  chan item

	flushReq  chan flushRequest
	runCtx    context.Context // canceled by Close: interrupts the sender's waits
	cancelRun context.CancelFunc
	closeCtx  context.Context // set by Close before cancelRun
	loopDone  chan struct{}
	repDone   chan struct{}
	closeOnce sync.Once

	failMu   sync.Mutex // the failures counted since the last successful report
	failures map[string]int
	failFrom time.Time
	reportMu sync.Mutex // one report at a time
}

// New returns a client over pool (its sessions must run as a registered workload role) and
// starts the background sender and the periodic send-failure reports. It fails only when the
// metrics cannot be registered on opts.Registerer.
func New(pool *pgxpool.Pool, opts Options) (*Client, error) {
	if pool == nil {
		return nil, errors.New("intake: nil pool")
	}
	opts = opts.withDefaults()
	c := &Client{
		pool: pool, opts: opts, log: opts.Logger,
		queue:    make(chan item, opts.BufferSize),
		flushReq: make(chan flushRequest),
		loopDone: make(chan struct{}),
		repDone:  make(chan struct{}),
		failures: map[string]int{},
	}
	c.m = newClientMetrics(opts.Workload, func() float64 { return float64(len(c.queue)) })
	if err := c.m.register(opts.Registerer); err != nil {
		return nil, err
	}
	c.runCtx, c.cancelRun = context.WithCancel(context.Background())
	go c.run()
	go c.reportLoop()
	return c, nil
}

// AcceptMany submits subs synchronously in calls of at most Options.BatchSize items and
// returns one Outcome per submission, in input order. It does not retry: an OB703 quota
// rejection comes back as an Outcome (see Outcome.RetryAfter). A submission whose Body is not
// valid JSON is not sent and is answered rejected with SQLState OB201. On an error of a whole
// call (ErrNotAWorkload, a lost connection, ctx) the outcomes of the calls that completed — a
// prefix of subs — are returned with the error; ids generated for empty ObservationIDs can be
// read from the outcomes.
func (c *Client) AcceptMany(ctx context.Context, subs []Submission) ([]Outcome, error) {
	out := make([]Outcome, 0, len(subs))
	for start := 0; start < len(subs); start += c.opts.BatchSize {
		end := min(start+c.opts.BatchSize, len(subs))
		items := make([]item, 0, end-start)
		for _, s := range subs[start:end] {
			items = append(items, newItem(s))
		}
		outs, err := c.call(ctx, items)
		if err != nil {
			return out, err
		}
		for _, o := range outs {
			c.m.outcome(o)
		}
		out = append(out, outs...)
	}
	return out, nil
}

// item is a submission ready to send: its id fixed (so every retry resubmits the same id) and
// its Submission@1 text encoded once.
type item struct {
	id         string
	doc        []byte // nil: the body is not valid JSON
	quotaTries int
}

type wireSubmission struct {
	ObservationID            string          `json:"observationId"`
	ObservationType          string          `json:"observationType"`
	ObservationSchemaVersion int             `json:"observationSchemaVersion"`
	SourceClaimedObservedAt  string          `json:"sourceClaimedObservedAt,omitempty"`
	Body                     json.RawMessage `json:"body"`
}

func newItem(s Submission) item {
	if s.ObservationID == "" {
		s.ObservationID = newUUID()
	}
	w := wireSubmission{ObservationID: s.ObservationID, ObservationType: s.ObservationType,
		ObservationSchemaVersion: s.ObservationSchemaVersion, Body: s.Body}
	if !s.SourceClaimedObservedAt.IsZero() {
		w.SourceClaimedObservedAt = s.SourceClaimedObservedAt.UTC().Format(time.RFC3339Nano)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return item{id: s.ObservationID}
	}
	return item{id: s.ObservationID, doc: bytes.TrimRight(buf.Bytes(), "\n")}
}

// call sends items in one intake.accept_observations call (items not encodable are answered
// locally) and returns their outcomes in order.
func (c *Client) call(ctx context.Context, items []item) ([]Outcome, error) {
	arr := make([]byte, 0, 256*len(items))
	arr = append(arr, '[')
	sent := 0
	for _, it := range items {
		if it.doc == nil {
			continue
		}
		if sent > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, it.doc...)
		sent++
	}
	arr = append(arr, ']')
	var rows []pgcall.ObservationOutcome
	if sent > 0 {
		var err error
		rows, err = pgcall.AcceptObservations(ctx, c.pool, arr)
		if err != nil {
			return nil, err
		}
		if len(rows) != sent {
			return nil, fmt.Errorf("%w: %d outcomes for %d submissions", errOutcomeCount, len(rows), sent)
		}
	}
	out := make([]Outcome, len(items))
	k := 0
	for i, it := range items {
		if it.doc == nil {
			out[i] = Outcome{Outcome: OutcomeRejected, ObservationID: it.id, SQLState: SQLStateNotCanonicalizable,
				Detail: "client: body is not valid JSON (not sent)"}
			continue
		}
		r := rows[k]
		k++
		out[i] = Outcome{Outcome: r.Outcome, ObservationID: r.ObservationID, AcceptedAt: r.AcceptedAt,
			SubmissionPayloadSHA256: r.SubmissionPayloadSHA256, AcceptedEnvelopeSHA256: r.AcceptedEnvelopeSHA256,
			SQLState: r.SQLState, Detail: r.Detail}
	}
	return out, nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
