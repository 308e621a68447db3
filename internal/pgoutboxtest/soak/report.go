package soak

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
)

// Report is the machine-checked outcome of a soak (T-8). Every count is read back from the
// databases after the run; Check lists the violated invariants.
type Report struct {
	Config   Config        `json:"-"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// ProduceDuration is how long the producers took to append everything.
	ProduceDuration time.Duration `json:"produce_duration"`
	TimedOut        bool          `json:"timed_out"`
	ProducerError   string        `json:"producer_error,omitempty"`

	ExpectedEvents     int64 `json:"expected_events"`
	EventsAppended     int64 `json:"events_appended"` // committed by the producers
	EventsInDB         int64 `json:"events_in_db"`
	EventsMissing      int64 `json:"events_missing"` // appended by a producer, absent from the database
	ExpectedDeliveries int64 `json:"expected_deliveries"`
	Deliveries         int64 `json:"deliveries"`

	// ByDestination: destination → status → deliveries.
	ByDestination map[string]map[string]int64 `json:"by_destination"`
	// AttemptsHistogram: attempts per delivery → deliveries.
	AttemptsHistogram map[int]int64 `json:"attempts_histogram"`
	// Finishes: "outcome/error_code" → attempt finishes.
	Finishes    map[string]int64  `json:"finishes"`
	Quarantined []QuarantineCount `json:"quarantined"`

	NonTerminal       int64           `json:"non_terminal"`
	Lost              int64           `json:"lost"` // NonTerminal + EventsMissing
	Published         int64           `json:"published"`
	FullyAcked        int64           `json:"fully_acked"`
	AttemptStarts     int64           `json:"attempt_starts"`
	OpenAttempts      int64           `json:"open_attempts"`
	MultiFinish       int64           `json:"multi_finish"`       // attempt starts with more than one finish
	AttemptCountSkew  int64           `json:"attempt_count_skew"` // deliveries whose attempt_count differs from their starts
	RecoveredLeases   int64           `json:"recovered_leases"`   // finishes lease_expired_unknown
	Retries           int64           `json:"retries"`            // finishes retryable
	InvalidAcks       int64           `json:"invalid_acks"`       // finishes retryable invalid_ack (must be 0: the kit answers valid acks)
	FencingRejections int64           `json:"fencing_rejections"` // OB001 seen by the dispatchers (late outcomes fenced off)
	Consumers         []ConsumerCount `json:"consumers"`
	DuplicatesApplied int64           `json:"duplicates_applied"` // events applied more than once at a consumer
	EffectMismatch    int64           `json:"effect_mismatch"`    // |applied − acknowledged| summed over consumers
	ReceiptMismatch   int64           `json:"receipt_mismatch"`   // |receipts − acknowledged| summed over consumers

	InjectedBefore      int64    `json:"injected_before"`
	InjectedLostAcks    int64    `json:"injected_lost_acks"`
	LostAckDeliveries   int64    `json:"lost_ack_deliveries"`
	LostAcksRedelivered int64    `json:"lost_acks_redelivered"` // of those, acknowledged on a later attempt
	ConsumerCalls       int64    `json:"consumer_calls"`
	RestartsRequested   int      `json:"restarts_requested"`
	RestartsDone        int      `json:"restarts_done"`
	AbandonedInFlight   int64    `json:"abandoned_in_flight"`
	Workers             []string `json:"workers"`
}

// QuarantineCount is quarantined deliveries of one destination and reason.
type QuarantineCount struct {
	Destination string `json:"destination"`
	Reason      string `json:"reason"`
	Count       int64  `json:"count"`
}

// ConsumerCount is one reference consumer's view.
type ConsumerCount struct {
	ConsumerName string `json:"consumer_name"`
	Destination  string `json:"destination"`
	Acknowledged int64  `json:"acknowledged"` // deliveries acknowledged in the outbox
	Applied      int64  `json:"applied"`      // distinct events with an effect
	Duplicated   int64  `json:"duplicated"`   // events applied more than once
	Receipts     int64  `json:"receipts"`
}

// EventsPerSecond is delivered (appended) events over the whole run.
func (r *Report) EventsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.EventsInDB) / r.Duration.Seconds()
}

// DeliveriesPerSecond is mandatory deliveries over the whole run.
func (r *Report) DeliveriesPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Deliveries) / r.Duration.Seconds()
}

// Check returns an error listing every violated invariant (nil when all hold).
func (r *Report) Check() error {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if r.TimedOut {
		add("time limit %s reached before every delivery was terminal", r.Config.TimeLimit)
	}
	if r.ProducerError != "" {
		add("producer failed: %s", r.ProducerError)
	}
	if r.EventsAppended != r.ExpectedEvents {
		add("events appended %d, want %d", r.EventsAppended, r.ExpectedEvents)
	}
	if r.EventsInDB != r.EventsAppended {
		add("events in the database %d, appended %d", r.EventsInDB, r.EventsAppended)
	}
	if r.Deliveries != r.ExpectedDeliveries {
		add("deliveries %d, want %d", r.Deliveries, r.ExpectedDeliveries)
	}
	if r.Lost != 0 {
		add("lost %d (non-terminal deliveries %d, events missing %d), want 0", r.Lost, r.NonTerminal, r.EventsMissing)
	}
	if r.Published != r.FullyAcked {
		add("published %d != fully acknowledged %d", r.Published, r.FullyAcked)
	}
	wantQ := int64(0)
	if r.Config.Rejected {
		wantQ = 1
	}
	if wantPub := r.EventsInDB - wantQ; r.Published != wantPub {
		add("published %d, want %d (every event but the rejected one)", r.Published, wantPub)
	}
	var q int64
	for _, c := range r.Quarantined {
		q += c.Count
		if c.Reason != "consumer_rejected" || c.Destination != "core_operations" {
			add("unexpected quarantine: %d at %s with reason %s", c.Count, c.Destination, c.Reason)
		}
	}
	if q != wantQ {
		add("quarantined %d, want %d (only the deliberately rejected event)", q, wantQ)
	}
	if r.OpenAttempts != 0 {
		add("open attempts %d, want 0", r.OpenAttempts)
	}
	if r.MultiFinish != 0 {
		add("attempt starts with more than one finish: %d, want 0", r.MultiFinish)
	}
	if r.AttemptCountSkew != 0 {
		add("deliveries whose attempt_count differs from their attempt starts: %d", r.AttemptCountSkew)
	}
	if r.DuplicatesApplied != 0 {
		add("duplicates applied at consumers: %d, want 0", r.DuplicatesApplied)
	}
	if r.EffectMismatch != 0 {
		add("effects applied differ from acknowledged deliveries by %d", r.EffectMismatch)
	}
	if r.ReceiptMismatch != 0 {
		add("receipts differ from acknowledged deliveries by %d", r.ReceiptMismatch)
	}
	if r.InvalidAcks != 0 {
		add("invalid acks %d: the kernel refused a reference consumer's ack", r.InvalidAcks)
	}
	if r.LostAcksRedelivered != r.LostAckDeliveries {
		add("lost-ack deliveries %d, acknowledged on a later attempt %d", r.LostAckDeliveries, r.LostAcksRedelivered)
	}
	if r.RestartsDone != r.RestartsRequested {
		add("restarts done %d of %d", r.RestartsDone, r.RestartsRequested)
	}
	if len(v) == 0 {
		return nil
	}
	return errors.New("soak invariants violated:\n  - " + strings.Join(v, "\n  - "))
}

func (r *run) report(ctx context.Context, cs *consumers, elapsed, produced time.Duration, timedOut bool) (*Report, error) {
	rep := &Report{Config: r.cfg, Duration: elapsed, ProduceDuration: produced, TimedOut: timedOut,
		ByDestination: map[string]map[string]int64{}, AttemptsHistogram: map[int]int64{}, Finishes: map[string]int64{},
		InjectedBefore: r.faults.injectedBefore.Load(), InjectedLostAcks: r.faults.injectedLost.Load(),
		ConsumerCalls: r.faults.calls.Load(), RestartsRequested: r.cfg.Restarts, RestartsDone: r.restarts,
		AbandonedInFlight: r.abandoned, FencingRejections: int64(r.fenced), Workers: r.workers}
	rep.Started = time.Now().Add(-elapsed)
	rep.ExpectedEvents = int64(r.cfg.Events)
	rep.ExpectedDeliveries = int64(r.cfg.Runs * DeliveriesPerRun)
	if r.cfg.Rejected {
		rep.ExpectedEvents++
		rep.ExpectedDeliveries++
	}
	r.mu.Lock()
	ids := append([]string(nil), r.appended...)
	if r.appendErr != nil && !(timedOut && errors.Is(r.appendErr, context.DeadlineExceeded)) {
		rep.ProducerError = r.appendErr.Error()
	} else if r.appendErr != nil {
		rep.ProducerError = "stopped by the time limit: " + r.appendErr.Error()
	}
	r.mu.Unlock()
	rep.EventsAppended = int64(len(ids))

	db, err := connectAs(ctx, r.cfg.ProducerDSN, "outbox_auditor")
	if err != nil {
		return nil, err
	}
	defer db.Close(ctx)
	s, err := pgcall.ReadPublicationSummary(ctx, db)
	if err != nil {
		return nil, err
	}
	rep.EventsInDB, rep.Published, rep.FullyAcked, rep.NonTerminal = s.Events, s.Published, s.FullyAcked, s.NonTerminal
	rep.AttemptStarts, rep.OpenAttempts = s.AttemptStarts, s.OpenAttempts

	if err := db.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_events e WHERE e.event_id = a.id)`, ids).Scan(&rep.EventsMissing); err != nil {
		return nil, fmt.Errorf("missing events: %w", err)
	}
	rep.Lost = rep.NonTerminal + rep.EventsMissing

	if err := scanGroups(ctx, db, `SELECT destination, status, count(*) FROM outbox.outbox_deliveries GROUP BY 1, 2`,
		func(rows pgx.Rows) error {
			var dest, status string
			var n int64
			if err := rows.Scan(&dest, &status, &n); err != nil {
				return err
			}
			if rep.ByDestination[dest] == nil {
				rep.ByDestination[dest] = map[string]int64{}
			}
			rep.ByDestination[dest][status] = n
			rep.Deliveries += n
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanGroups(ctx, db, `SELECT attempt_count, count(*) FROM outbox.outbox_deliveries GROUP BY 1`,
		func(rows pgx.Rows) error {
			var a int
			var n int64
			if err := rows.Scan(&a, &n); err != nil {
				return err
			}
			rep.AttemptsHistogram[a] = n
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanGroups(ctx, db, `SELECT outcome, COALESCE(normalized_error_code, ''), count(*)
		FROM outbox.outbox_delivery_attempt_finishes GROUP BY 1, 2`,
		func(rows pgx.Rows) error {
			var outcome, code string
			var n int64
			if err := rows.Scan(&outcome, &code, &n); err != nil {
				return err
			}
			key := outcome
			if code != "" {
				key += "/" + code
			}
			rep.Finishes[key] = n
			switch {
			case outcome == "lease_expired_unknown":
				rep.RecoveredLeases += n
			case outcome == "retryable":
				rep.Retries += n
				if code == "invalid_ack" {
					rep.InvalidAcks += n
				}
			}
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanGroups(ctx, db, `SELECT destination, reason, count(*) FROM outbox.outbox_quarantine GROUP BY 1, 2 ORDER BY 1, 2`,
		func(rows pgx.Rows) error {
			var q QuarantineCount
			if err := rows.Scan(&q.Destination, &q.Reason, &q.Count); err != nil {
				return err
			}
			rep.Quarantined = append(rep.Quarantined, q)
			return nil
		}); err != nil {
		return nil, err
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT attempt_id FROM outbox.outbox_delivery_attempt_finishes
		GROUP BY attempt_id HAVING count(*) > 1) AS x`).Scan(&rep.MultiFinish); err != nil {
		return nil, err
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_deliveries d
		LEFT JOIN (SELECT destination, event_id, count(*) AS n FROM outbox.outbox_delivery_attempt_starts GROUP BY 1, 2) s
		USING (destination, event_id) WHERE d.attempt_count <> COALESCE(s.n, 0)`).Scan(&rep.AttemptCountSkew); err != nil {
		return nil, err
	}
	lost := r.faults.lostDeliveries()
	rep.LostAckDeliveries = int64(len(lost))
	if len(lost) > 0 {
		dests, evs := make([]string, len(lost)), make([]string, len(lost))
		for i, k := range lost {
			dests[i], evs[i] = k.Destination, k.EventID
		}
		if err := db.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[], $2::uuid[]) AS k(destination, event_id)
			JOIN outbox.outbox_deliveries d USING (destination, event_id)
			WHERE d.status = 'acknowledged' AND d.attempt_count >= 2`, dests, evs).Scan(&rep.LostAcksRedelivered); err != nil {
			return nil, err
		}
	}
	for _, spec := range reference.All() {
		c := ConsumerCount{ConsumerName: spec.ConsumerName, Destination: spec.Destination,
			Acknowledged: rep.ByDestination[spec.Destination]["acknowledged"]}
		pool := cs.pools[spec.ConsumerName]
		if c.Applied, c.Duplicated, err = spec.Effects(ctx, pool); err != nil {
			return nil, err
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM inbox.inbox_receipts WHERE consumer_name = $1`, spec.ConsumerName).
			Scan(&c.Receipts); err != nil {
			return nil, err
		}
		rep.DuplicatesApplied += c.Duplicated
		rep.EffectMismatch += abs(c.Applied - c.Acknowledged)
		rep.ReceiptMismatch += abs(c.Receipts - c.Acknowledged)
		rep.Consumers = append(rep.Consumers, c)
	}
	return rep, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func scanGroups(ctx context.Context, db *pgx.Conn, sql string, scan func(pgx.Rows) error) error {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// fencingRejections sums the dispatcher's OB001 counter.
func fencingRejections(m *metrics.Metrics) float64 {
	fams, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != "pgoutbox_dispatcher_fencing_rejections_total" {
			continue
		}
		for _, mm := range f.GetMetric() {
			sum += mm.GetCounter().GetValue()
		}
	}
	return sum
}

// String renders the report as Markdown.
func (r *Report) String() string { return r.Markdown() }

// Markdown renders the report (docs/soak-report.md).
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	verdict := "PASS — every invariant holds"
	if err := r.Check(); err != nil {
		verdict = "FAIL\n\n```\n" + err.Error() + "\n```"
	}
	w("# Soak report (T-8)")
	w("")
	w("Generated by `make soak` (`go run ./tools/soak`) on %s.", r.Started.UTC().Format(time.RFC3339))
	w("")
	w("**Verdict: %s**", verdict)
	w("")
	w("## Run")
	w("")
	c := r.Config
	w("| setting | value |")
	w("|---|---|")
	w("| events | %d business events (%d runs × %d reference event types)%s |", c.Events, c.Runs, EventsPerRun, map[bool]string{true: " + 1 rejected", false: ""}[c.Rejected])
	w("| producers | %d concurrent, producer.Append in business transactions |", c.Producers)
	w("| consumers | the 4 reference consumers, each in its own database, %s transport |", c.Transport)
	w("| injected failures | %.2f %% retryable before applying, %.2f %% lost acks after the receipt commit (seed %d) |", 100*c.FailureRate, 100*c.LostAckRate, c.Seed)
	w("| dispatcher | concurrency %d, batch %d, lease %s, pool %d; %d restarts with %s shutdown grace |", c.Concurrency, c.BatchSize, c.Lease, c.DBMaxConns, c.Restarts, c.RestartGrace)
	w("| time limit | %s |", c.TimeLimit)
	w("| duration | %s (producers done after %s)%s |", r.Duration.Round(time.Millisecond), r.ProduceDuration.Round(time.Millisecond), map[bool]string{true: " — TIMED OUT", false: ""}[r.TimedOut])
	w("| throughput | %.0f events/s, %.0f deliveries/s end to end |", r.EventsPerSecond(), r.DeliveriesPerSecond())
	w("")
	w("## Invariants")
	w("")
	w("| invariant | value | required |")
	w("|---|---|---|")
	w("| events appended by producers | %d | %d |", r.EventsAppended, r.ExpectedEvents)
	w("| events in the database | %d | = appended |", r.EventsInDB)
	w("| mandatory deliveries | %d | %d |", r.Deliveries, r.ExpectedDeliveries)
	w("| lost (non-terminal %d + events missing %d) | %d | 0 |", r.NonTerminal, r.EventsMissing, r.Lost)
	w("| published / fully acknowledged | %d / %d | equal |", r.Published, r.FullyAcked)
	w("| duplicates applied at consumers | %d | 0 |", r.DuplicatesApplied)
	w("| effects ≠ acknowledged, receipts ≠ acknowledged | %d, %d | 0, 0 |", r.EffectMismatch, r.ReceiptMismatch)
	w("| attempt starts with more than one finish | %d | 0 |", r.MultiFinish)
	w("| open attempts | %d | 0 |", r.OpenAttempts)
	w("| attempt_count ≠ attempt starts | %d | 0 |", r.AttemptCountSkew)
	w("| invalid acks (kernel refused a consumer ack) | %d | 0 |", r.InvalidAcks)
	w("| lost-ack deliveries acknowledged on a later attempt | %d of %d | all |", r.LostAcksRedelivered, r.LostAckDeliveries)
	w("| restarts | %d of %d | all |", r.RestartsDone, r.RestartsRequested)
	w("")
	w("## Faults injected and survived")
	w("")
	w("| fault | count |")
	w("|---|---|")
	w("| consumer calls | %d |", r.ConsumerCalls)
	w("| retryable consumer_unavailable before applying | %d |", r.InjectedBefore)
	w("| lost acks (receipt committed, answer dropped) | %d |", r.InjectedLostAcks)
	w("| in-flight deliveries abandoned by restarts | %d |", r.AbandonedInFlight)
	w("| leases recovered as lease_expired_unknown | %d |", r.RecoveredLeases)
	w("| retryable finishes (all codes) | %d |", r.Retries)
	w("| late outcomes fenced off (OB001) | %d |", r.FencingRejections)
	w("")
	w("## Deliveries by destination and final state")
	w("")
	w("| destination | acknowledged | quarantined | pending | leased |")
	w("|---|---|---|---|---|")
	dests := make([]string, 0, len(r.ByDestination))
	for d := range r.ByDestination {
		dests = append(dests, d)
	}
	sort.Strings(dests)
	for _, d := range dests {
		m := r.ByDestination[d]
		w("| %s | %d | %d | %d | %d |", d, m["acknowledged"], m["quarantined"], m["pending"], m["leased"])
	}
	w("")
	w("## Attempts per delivery")
	w("")
	w("| attempts | deliveries |")
	w("|---|---|")
	ks := make([]int, 0, len(r.AttemptsHistogram))
	for k := range r.AttemptsHistogram {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	for _, k := range ks {
		w("| %d | %d |", k, r.AttemptsHistogram[k])
	}
	w("")
	w("## Attempt finishes by outcome")
	w("")
	w("| outcome / code | finishes |")
	w("|---|---|")
	fs := make([]string, 0, len(r.Finishes))
	for k := range r.Finishes {
		fs = append(fs, k)
	}
	sort.Strings(fs)
	for _, k := range fs {
		w("| %s | %d |", k, r.Finishes[k])
	}
	w("")
	w("## Quarantined (reasons)")
	w("")
	if len(r.Quarantined) == 0 {
		w("none")
	} else {
		w("| destination | reason | deliveries |")
		w("|---|---|---|")
		for _, q := range r.Quarantined {
			w("| %s | %s | %d |", q.Destination, q.Reason, q.Count)
		}
	}
	w("")
	w("## Consumers")
	w("")
	w("| consumer | destination | acknowledged | applied | duplicated | receipts |")
	w("|---|---|---|---|---|---|")
	for _, cc := range r.Consumers {
		w("| %s | %s | %d | %d | %d | %d |", cc.ConsumerName, cc.Destination, cc.Acknowledged, cc.Applied, cc.Duplicated, cc.Receipts)
	}
	w("")
	w("Dispatcher instances: %s.", strings.Join(r.Workers, ", "))
	return b.String()
}
