// Package pump is the pump of the mailbox inbox pipeline (SPEC §10, R-MX-1..12): it reads a
// legacy mailbox table of another database by monotonic msg_id, records what it saw through
// mailbox.record_discovery (enqueue and watermark in one transaction), processes the single
// queue head in our database's transactions (handler + outbox.append_event +
// mailbox.complete_head, all or nothing), and writes the processed mark back to the mailbox
// (empty -> timestamp, never overwritten). All state lives in PostgreSQL; this package only
// moves rows between the two databases and calls the SQL API through internal/pgcall.
//
// The pump knows no business: it runs any implementation of the public interface
// github.com/oceanway/pgoutbox/mailbox.Handler. Plug in your own with New:
//
//	p, err := New(cfg, our, box, myHandler{}, nil, nil) // myHandler implements mailbox.Handler
//
// or, for a command, with the HandlerFactory argument of Process. cmd/mailboxpump and the demo
// wire in the reference handler (reference.MailboxHandler, reference/mailbox.go).
package pump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/mailbox"
)

// Config is the pump's configuration (cmd/mailboxpump maps flags and environment onto it).
type Config struct {
	Source         string        // registered source name (a literal, D-4)
	Table          string        // mailbox table: name or schema.name (validated, quoted)
	Worker         string        // lease owner literal
	Lease          time.Duration // head lease: 1 second..1 hour
	DiscoveryBatch int           // rows read per discovery: 1..10000
	HeadsPerTick   int           // heads processed before discovery and backfill run again: 1..100000
	BackfillBatch  int           // marks per backfill round: 1..1000
	PollInterval   time.Duration // idle wait between ticks: 10ms..1 minute
	LateRescan     time.Duration // how long released holes are re-read for late rows: 0..30 days
	StatusInterval time.Duration // how often pipeline_status refreshes the gauges
}

// Defaults returns a configuration with safe defaults (Source and Table still to be set).
func Defaults() Config {
	return Config{Worker: "mailboxpump", Lease: 5 * time.Minute, DiscoveryBatch: 500, HeadsPerTick: 1000,
		BackfillBatch: 200, PollInterval: time.Second, LateRescan: time.Hour, StatusInterval: 5 * time.Second}
}

var (
	literalRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]*$`)
	identRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)
)

// Validate refuses out-of-range values (D-5: refuse to start rather than run unsafely).
func (c Config) Validate() error {
	var errs []string
	if !literalRE.MatchString(c.Source) || len(c.Source) > 200 {
		errs = append(errs, "source must match ^[a-z0-9][a-z0-9._@-]*$")
	}
	if _, err := QuoteTable(c.Table); err != nil {
		errs = append(errs, err.Error())
	}
	if !literalRE.MatchString(c.Worker) || len(c.Worker) > 200 {
		errs = append(errs, "worker must match ^[a-z0-9][a-z0-9._@-]*$")
	}
	if c.Lease < time.Second || c.Lease > time.Hour {
		errs = append(errs, "lease must be within 1s..1h")
	}
	if c.DiscoveryBatch < 1 || c.DiscoveryBatch > 10000 {
		errs = append(errs, "discovery batch must be within 1..10000")
	}
	if c.HeadsPerTick < 1 || c.HeadsPerTick > 100000 {
		errs = append(errs, "heads per tick must be within 1..100000")
	}
	if c.BackfillBatch < 1 || c.BackfillBatch > 1000 {
		errs = append(errs, "backfill batch must be within 1..1000")
	}
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Minute {
		errs = append(errs, "poll interval must be within 10ms..1m")
	}
	if c.LateRescan < 0 || c.LateRescan > 30*24*time.Hour {
		errs = append(errs, "late rescan must be within 0..720h")
	}
	if c.StatusInterval < 10*time.Millisecond || c.StatusInterval > time.Hour {
		errs = append(errs, "status interval must be within 10ms..1h")
	}
	if len(errs) > 0 {
		return errors.New("invalid mailbox pump config: " + strings.Join(errs, "; "))
	}
	return nil
}

// QuoteTable validates a mailbox table name (name or schema.name, plain identifiers) and
// returns it quoted for SQL.
func QuoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 || name == "" {
		return "", fmt.Errorf("mailbox table %q must be name or schema.name", name)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return "", fmt.Errorf("mailbox table %q: %q is not a plain identifier", name, p)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// ErrPumpHeld means that another live session holds the source's pump (R-MX-11).
var ErrPumpHeld = errors.New("another mailbox pump holds this source")

// Pump runs one source. our is the dedicated session in our database (it holds the source for
// its lifetime: every mutating call goes through it); box reads and marks the mailbox.
type Pump struct {
	cfg     Config
	our     *pgx.Conn
	box     *pgxpool.Pool
	h       mailbox.Handler
	m       *Metrics
	log     *slog.Logger
	table   string
	w       int64
	started bool
	status  time.Time
	stats   Stats
}

// Stats are counters of this pump's work (the demo and the benchmark print them).
type Stats struct {
	// Ticks counts the pump's rounds; Discovered the mailbox rows recorded; Succeeded, Dead
	// and Failed the heads processed by outcome; Marked, AlreadyMarked and Missing the
	// processed marks written back (or found written, or without their row); Transient the
	// rounds that hit a transient error.
	Ticks, Discovered, Succeeded, Dead, Failed, Marked, AlreadyMarked, Missing, Transient int
}

// New checks cfg and builds a pump that runs h for every head; nothing touches a database yet.
// h is any mailbox.Handler: the reference handler (reference.MailboxHandler) or your own.
func New(cfg Config, our *pgx.Conn, box *pgxpool.Pool, h mailbox.Handler, m *Metrics, log *slog.Logger) (*Pump, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("mailbox pump: no handler")
	}
	t, _ := QuoteTable(cfg.Table)
	if m == nil {
		m = NewMetrics(cfg.Source)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pump{cfg: cfg, our: our, box: box, h: h, m: m, log: log.With("source", cfg.Source), table: t}, nil
}

// Stats returns the counters so far.
func (p *Pump) Stats() Stats { return p.stats }

// Acquire makes this pump's session the single active pump of the source (R-MX-11);
// ErrPumpHeld when another live session holds it.
func (p *Pump) Acquire(ctx context.Context) error {
	ok, err := pgcall.AcquirePump(ctx, p.our, p.cfg.Source)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: source %s", ErrPumpHeld, p.cfg.Source)
	}
	if !p.started {
		// Only short OLTP statements run on this session: JIT compilation would cost far more
		// than it saves (measured on record_discovery and append_events).
		// synchronous_commit off for the session: a lost discovery, claim, backfill record or
		// failed attempt is redone safely after a crash (W and its rows vanish together; a mark
		// already written reads back as already_marked). Every transaction that makes a row
		// terminal - after which its mark may be written - turns it back on (durable first).
		if _, err := p.our.Exec(ctx, "SET jit = off; SET synchronous_commit = off"); err != nil {
			return err
		}
		st, err := pgcall.GetPipelineStatus(ctx, p.our, p.cfg.Source)
		if err != nil {
			return err
		}
		p.w = st.Watermark
		p.started = true
	}
	return nil
}

// Run acquires the source and ticks until ctx is cancelled; then it finishes the message in
// flight and returns nil (SIGTERM drains). Database calls run on a context that is not
// cancelled, so a drain never breaks a transaction halfway (the lease bounds a stuck call).
func (p *Pump) Run(ctx context.Context) error {
	dctx := context.WithoutCancel(ctx)
	if err := p.Acquire(dctx); err != nil {
		return err
	}
	p.log.Info("mailbox pump started", "watermark", p.w)
	for ctx.Err() == nil {
		busy, err := p.Tick(ctx)
		if err != nil {
			p.m.TickFailures.WithLabelValues(p.cfg.Source).Inc()
			p.log.Error("mailbox pump tick failed", "err", err)
			if p.our.IsClosed() {
				return fmt.Errorf("lost the pump session: %w", err)
			}
			busy = false
		}
		if !busy {
			select {
			case <-ctx.Done():
			case <-time.After(p.cfg.PollInterval):
			}
		}
	}
	p.log.Info("mailbox pump drained", "stats", fmt.Sprintf("%+v", p.stats))
	return nil
}

// Tick runs one round: heartbeat, discovery, up to HeadsPerTick heads, one backfill batch and,
// when due, the status gauges. busy reports whether there may be more work right away.
func (p *Pump) Tick(ctx context.Context) (busy bool, err error) {
	dctx := context.WithoutCancel(ctx)
	if err := p.Acquire(dctx); err != nil { // heartbeat; fails only if the hold was lost
		return false, err
	}
	// A failing discovery (the mailbox unreachable, or OB401: a known id came back with another
	// message) does not stop the work already enqueued: heads and marks go on, and the error is
	// returned (logged, counted) once they ran.
	found, discErr := p.Discover(dctx)
	if discErr != nil {
		discErr = fmt.Errorf("discover: %w", discErr)
	}
	heads := 0
	for heads < p.cfg.HeadsPerTick && ctx.Err() == nil {
		did, err := p.ProcessHead(dctx)
		if err != nil {
			return false, fmt.Errorf("process head: %w", err)
		}
		if !did {
			break
		}
		heads++
	}
	marked, err := p.Backfill(dctx)
	if err != nil {
		return false, fmt.Errorf("backfill: %w", err)
	}
	if time.Since(p.status) >= p.cfg.StatusInterval {
		if err := p.RefreshStatus(dctx); err != nil {
			return false, fmt.Errorf("status: %w", err)
		}
	}
	if discErr != nil {
		return false, discErr
	}
	p.stats.Ticks++
	p.m.Ticks.WithLabelValues(p.cfg.Source).Inc()
	p.m.beat()
	return found >= p.cfg.DiscoveryBatch || heads >= p.cfg.HeadsPerTick || marked >= p.cfg.BackfillBatch, nil
}

// Discover reads rows with msg_id > W (never the processed mark, R-MX-5) plus the ids of holes
// released within LateRescan (late rows, R-MX-2) and records them in one call
// (mailbox.record_discovery: enqueue and W in one transaction). Returns the rows read above W.
func (p *Pump) Discover(ctx context.Context) (int, error) {
	rows, err := p.readMailbox(ctx, fmt.Sprintf(`SELECT msg_id, received_at, message::text FROM %s WHERE msg_id > $1 ORDER BY msg_id LIMIT $2`, p.table),
		p.w, p.cfg.DiscoveryBatch)
	if err != nil {
		return 0, err
	}
	n := len(rows)
	if p.cfg.LateRescan > 0 {
		holes, err := pgcall.ReleasedHoles(ctx, p.our, p.cfg.Source, p.cfg.LateRescan, 1000)
		if err != nil {
			return 0, err
		}
		if len(holes) > 0 {
			lo, hi := make([]int64, len(holes)), make([]int64, len(holes))
			for i, h := range holes {
				lo[i], hi[i] = h.FirstID, h.LastID
			}
			late, err := p.readMailbox(ctx, fmt.Sprintf(`SELECT t.msg_id, t.received_at, t.message::text FROM %s AS t
				JOIN unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) ON t.msg_id BETWEEN r.lo AND r.hi
				ORDER BY t.msg_id LIMIT 10000`, p.table), lo, hi)
			if err != nil {
				return 0, err
			}
			rows = append(late, rows...)
		}
	}
	res, err := pgcall.RecordDiscovery(ctx, p.our, p.cfg.Source, rows)
	if err != nil {
		return 0, err
	}
	if res.Enqueued > 0 || res.ReleasedHoles > 0 || res.Watermark != p.w {
		p.log.Debug("discovered", "read", n, "enqueued", res.Enqueued, "watermark", res.Watermark,
			"open_holes", res.OpenHoles, "released_holes", res.ReleasedHoles)
	}
	if res.ReleasedHoles > 0 {
		p.log.Warn("hole released: watermark skipped ids that never appeared", "released_ids", res.ReleasedHoles, "watermark", res.Watermark)
	}
	p.w = res.Watermark
	p.stats.Discovered += res.Enqueued
	return n, nil
}

func (p *Pump) readMailbox(ctx context.Context, sql string, args ...any) ([]pgcall.MailboxRow, error) {
	rs, err := p.box.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read mailbox: %w", err)
	}
	defer rs.Close()
	var out []pgcall.MailboxRow
	for rs.Next() {
		var r pgcall.MailboxRow
		var msg string
		if err := rs.Scan(&r.MsgID, &r.ReceivedAt, &msg); err != nil {
			return nil, fmt.Errorf("read mailbox: %w", err)
		}
		r.Message = []byte(msg)
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read mailbox: %w", err)
	}
	return out, nil
}

// ProcessHead claims the head and runs the handler in one transaction with complete_head
// (R-MX-10). A *Rejection ends the message DEAD (own transaction); any other handler error
// rolls back and backs off through fail_head. false when no head is due.
func (p *Pump) ProcessHead(ctx context.Context) (bool, error) {
	head, err := pgcall.ClaimHead(ctx, p.our, p.cfg.Source, p.cfg.Worker, p.cfg.Lease)
	if err != nil || head == nil {
		return false, err
	}
	outcome, herr := p.runHandler(ctx, head)
	if herr == nil {
		if outcome == pgcall.HeadDead {
			p.stats.Dead++
		} else {
			p.stats.Succeeded++
		}
		return true, nil
	}
	var rej *mailbox.Rejection
	if errors.As(herr, &rej) {
		reason := rej.Reason
		if err := p.durable(ctx, func(tx pgx.Tx) error {
			return pgcall.CompleteHead(ctx, tx, p.cfg.Source, head.MsgID, head.LeaseToken, pgcall.HeadDead, &reason)
		}); err != nil {
			return false, err
		}
		p.stats.Dead++
		p.m.Processed.WithLabelValues(p.cfg.Source, pgcall.HeadDead).Inc()
		p.log.Warn("message dead", "msg_id", head.MsgID, "reason", reason)
		return true, nil
	}
	code := "database_unavailable"
	var ec mailbox.ErrorCode
	if errors.As(herr, &ec) {
		code = ec.ErrorCode()
	}
	var st string
	err = p.durable(ctx, func(tx pgx.Tx) (err error) {
		st, err = pgcall.FailHead(ctx, tx, p.cfg.Source, head.MsgID, head.LeaseToken, code)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("fail head after %v: %w", herr, err)
	}
	p.log.Warn("handler failed", "msg_id", head.MsgID, "attempt", head.Attempt, "error_code", code, "result", st, "err", herr)
	if st == pgcall.HeadDead {
		p.stats.Dead++
	} else {
		p.stats.Failed++
	}
	p.m.Processed.WithLabelValues(p.cfg.Source, st).Inc()
	return true, nil
}

// runHandler runs the handler and complete_head in one transaction and commits; it returns the
// committed outcome, or the error after which the transaction was rolled back.
func (p *Pump) runHandler(ctx context.Context, head *pgcall.Head) (string, error) {
	tx, err := p.our.BeginTx(ctx, durableTx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := p.h.Handle(ctx, tx, p.cfg.Source, &mailbox.Head{MsgID: head.MsgID, Message: head.Message,
		Attempt: head.Attempt, LeaseToken: head.LeaseToken})
	if err != nil {
		return "", err
	}
	outcome, reason := pgcall.HeadSucceeded, (*string)(nil)
	if res.Outcome == mailbox.Dead {
		outcome, reason = pgcall.HeadDead, &res.Reason
	}
	if err := pgcall.CompleteHead(ctx, tx, p.cfg.Source, head.MsgID, head.LeaseToken, outcome, reason); err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	p.m.Processed.WithLabelValues(p.cfg.Source, outcome).Inc()
	return outcome, nil
}

// durableTx begins a transaction that commits with synchronous_commit on (one round trip: the
// SET LOCAL rides with BEGIN in one simple-protocol message).
var durableTx = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = on"}

// durable runs f in a transaction committed with synchronous_commit on: a terminal state must be
// on disk before the mailbox mark that follows it can be written (R-MX-8).
func (p *Pump) durable(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := p.our.BeginTx(ctx, durableTx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Backfill writes the processed mark of terminal rows in the mailbox (R-MX-7, R-MX-8): one
// UPDATE ... SET processed_at = now() WHERE msg_id = ANY(ids) AND processed_at IS NULL (empty ->
// timestamp, never overwritten, no row lock held beyond the statement), then one SELECT to tell
// already_marked from missing; a failing mailbox makes every id transient. The outcomes are
// recorded in one transaction of ours. Returns the ids handled.
func (p *Pump) Backfill(ctx context.Context) (int, error) {
	ids, err := pgcall.ClaimBackfill(ctx, p.our, p.cfg.Source, p.cfg.BackfillBatch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	outcome := make(map[int64]string, len(ids))
	written, err := p.idSet(ctx, fmt.Sprintf(`UPDATE %s SET processed_at = now() WHERE msg_id = ANY($1) AND processed_at IS NULL RETURNING msg_id`, p.table), ids)
	var present map[int64]bool
	if err == nil {
		present, err = p.idSet(ctx, fmt.Sprintf(`SELECT msg_id FROM %s WHERE msg_id = ANY($1)`, p.table), ids)
	}
	if err != nil {
		// The batch failed as a whole (one row refused, a lock timeout, the mailbox down): mark
		// one by one, so one bad row never holds the others' marks back.
		p.log.Warn("mailbox batch mark failed; marking one by one", "ids", len(ids), "err", err)
		for _, id := range ids {
			outcome[id] = p.markOne(ctx, id)
		}
	} else {
		for _, id := range ids {
			switch {
			case written[id]:
				outcome[id] = pgcall.BackfillWritten
			case present[id]:
				outcome[id] = pgcall.BackfillAlreadyMarked
			default:
				outcome[id] = pgcall.BackfillMissing
			}
		}
	}
	tx, err := p.our.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, id := range ids {
		res, err := pgcall.RecordBackfill(ctx, tx, p.cfg.Source, id, outcome[id])
		if err != nil {
			return 0, err
		}
		if res == pgcall.BackfillAbandoned {
			p.m.BackfillsAbandoned.WithLabelValues(p.cfg.Source).Inc()
			p.log.Error("backfill abandoned: the processed mark was given up; resolve with outboxctl mailbox resolve",
				"msg_id", id, "outcome", outcome[id])
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	for _, id := range ids {
		o := outcome[id]
		p.m.Backfills.WithLabelValues(p.cfg.Source, o).Inc()
		switch o {
		case pgcall.BackfillWritten:
			p.stats.Marked++
		case pgcall.BackfillAlreadyMarked:
			p.stats.AlreadyMarked++
		case pgcall.BackfillMissing:
			p.stats.Missing++
		default:
			p.stats.Transient++
		}
	}
	return len(ids), nil
}

// markOne writes one mark: empty -> timestamp; then tells already_marked from missing; any
// error is transient.
func (p *Pump) markOne(ctx context.Context, id int64) string {
	tag, err := p.box.Exec(ctx, fmt.Sprintf(`UPDATE %s SET processed_at = now() WHERE msg_id = $1 AND processed_at IS NULL`, p.table), id)
	if err != nil {
		return pgcall.BackfillTransient
	}
	if tag.RowsAffected() == 1 {
		return pgcall.BackfillWritten
	}
	var exists bool
	if err := p.box.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE msg_id = $1)`, p.table), id).Scan(&exists); err != nil {
		return pgcall.BackfillTransient
	}
	if exists {
		return pgcall.BackfillAlreadyMarked
	}
	return pgcall.BackfillMissing
}

func (p *Pump) idSet(ctx context.Context, sql string, ids []int64) (map[int64]bool, error) {
	rs, err := p.box.Query(ctx, sql, ids)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[int64]bool{}
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rs.Err()
}

// RefreshStatus reads mailbox.pipeline_status into the gauges (R-MX-12).
func (p *Pump) RefreshStatus(ctx context.Context) error {
	st, err := pgcall.GetPipelineStatus(ctx, p.our, p.cfg.Source)
	if err != nil {
		return err
	}
	s := p.cfg.Source
	p.m.Watermark.WithLabelValues(s).Set(float64(st.Watermark))
	p.m.LagIDs.WithLabelValues(s).Set(float64(st.LagIDs))
	p.m.LagSeconds.WithLabelValues(s).Set(st.LagSeconds)
	p.m.OpenHoles.WithLabelValues(s).Set(float64(st.OpenHoles))
	p.m.ReleasedHoles.WithLabelValues(s).Set(float64(st.ReleasedHoles))
	p.m.LateRows.WithLabelValues(s).Set(float64(st.LateRows))
	p.m.OldestUnmarked.WithLabelValues(s).Set(st.OldestUnmarkedTerminalSeconds)
	p.m.Abandoned.WithLabelValues(s).Set(float64(st.AbandonedBackfills))
	p.m.DeadLetters.WithLabelValues(s).Set(float64(st.DeadLetters))
	// The watermark's distance from the mailbox's newest row (a backward index probe of the
	// mailbox's primary key; the mailbox is only read).
	var maxID *int64
	if err := p.box.QueryRow(ctx, fmt.Sprintf(`SELECT max(msg_id) FROM %s`, p.table)).Scan(&maxID); err != nil {
		return fmt.Errorf("read mailbox: %w", err)
	}
	behind := int64(0)
	if maxID != nil && *maxID > st.Watermark {
		behind = *maxID - st.Watermark
	}
	p.m.MailboxLagIDs.WithLabelValues(s).Set(float64(behind))
	p.status = time.Now()
	return nil
}
