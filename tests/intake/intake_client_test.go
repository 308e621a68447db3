package intake

// The Go client of the observation intake (package intake; issue 22 item 5): batching and order
// of AcceptMany, replays, the background sender honouring OB703 retryAfterSeconds with bounded
// retries, the bounded buffer dropping and counting, transient connection errors retried, and
// send failures reported through intake.record_send_failures (SPEC R-OB-2, R-OB-5, R-OB-6).
// Assertions are on outcomes, database rows and metric values; waits are barriers (a lock the
// test holds, the client's Sleep hook), never timings.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/intake"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// AcceptMany of 250 submissions makes 3 calls of at most 100 (one transaction each, so one
// acceptedAt per call), answers in input order (an invalid body OB702 and a body that is not
// JSON OB201 in their places, an empty id generated), counts outcomes; the same 250 again are
// accepted_existing with the original acceptedAt; an unregistered role gets ErrNotAWorkload.
func TestIntakeClientAcceptManyBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	c, reg := ikcClient(t, ikcPool(t, b.Dsn, intakefix.RoleA), intake.Options{})
	subs := make([]intake.Submission, 250)
	for i := range subs {
		subs[i] = ikcSub(t, testfix.NewUUID())
	}
	subs[7].Body = []byte(`{"requestId":"r-7","outcome":"succeeded","color":"red"}`)
	subs[120].Body = []byte(`{"requestId":`)
	subs[200].ObservationID = ""
	outs, err := c.AcceptMany(ctx, subs)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(subs) {
		t.Fatalf("%d outcomes for %d submissions", len(outs), len(subs))
	}
	callAt := map[int]time.Time{}
	for i, o := range outs {
		switch i {
		case 7:
			if o.Outcome != intake.OutcomeRejected || o.SQLState != intake.SQLStateInvalid {
				t.Fatalf("item 7: %s/%s (%s), want rejected/OB702", o.Outcome, o.SQLState, o.Detail)
			}
		case 120:
			if o.Outcome != intake.OutcomeRejected || o.SQLState != intake.SQLStateNotCanonicalizable {
				t.Fatalf("item 120: %s/%s, want rejected/OB201", o.Outcome, o.SQLState)
			}
		default:
			if o.Outcome != intake.OutcomeAcceptedNew || !o.Accepted() {
				t.Fatalf("item %d: %s/%s (%s)", i, o.Outcome, o.SQLState, o.Detail)
			}
			if at, ok := callAt[i/100]; ok && !at.Equal(o.AcceptedAt) {
				t.Fatalf("item %d: acceptedAt %v, its batch's %v", i, o.AcceptedAt, at)
			}
			callAt[i/100] = o.AcceptedAt
		}
		want := subs[i].ObservationID
		if i == 200 {
			if len(o.ObservationID) != 36 {
				t.Fatalf("item 200: generated id %q", o.ObservationID)
			}
			subs[200].ObservationID = o.ObservationID // resubmit the same id below
		} else if o.ObservationID != want {
			t.Fatalf("item %d: id %s, want %s (order)", i, o.ObservationID, want)
		}
	}
	if len(callAt) != 3 || callAt[0].Equal(callAt[1]) || callAt[1].Equal(callAt[2]) {
		t.Fatalf("calls by acceptedAt: %v, want 3 distinct", callAt)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_ids WHERE workload_principal_id = $1`, intakefix.WorkloadA); n != 248 {
		t.Fatalf("%d ids stored, want 248", n)
	}
	again, err := c.AcceptMany(ctx, subs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range again {
		if i == 7 || i == 120 {
			if o.Outcome != intake.OutcomeRejected {
				t.Fatalf("item %d again: %s", i, o.Outcome)
			}
			continue
		}
		if o.Outcome != intake.OutcomeAcceptedExisting || !o.AcceptedAt.Equal(outs[i].AcceptedAt) || o.ObservationID != subs[i].ObservationID {
			t.Fatalf("item %d again: %s %v %s, want accepted_existing %v", i, o.Outcome, o.AcceptedAt, o.ObservationID, outs[i].AcceptedAt)
		}
	}
	for label, want := range map[string]float64{
		intake.OutcomeAcceptedNew: 248, intake.OutcomeAcceptedExisting: 248, intake.OutcomeRejected: 4,
		intake.OutcomeConflict: 0, intake.OutcomeAcceptedExistingPurged: 0,
	} {
		if got := ikcMetric(t, reg, "outcomes_total", label); got != want {
			t.Fatalf("outcomes_total{%s} = %v, want %v", label, got, want)
		}
	}
	if got := ikcMetric(t, reg, "rejections_total", "OB702"); got != 2 {
		t.Fatalf("rejections_total{OB702} = %v, want 2", got)
	}
	if got := ikcMetric(t, reg, "rejections_total", "OB201"); got != 2 {
		t.Fatalf("rejections_total{OB201} = %v, want 2", got)
	}

	unreg, _ := ikcClient(t, ikcPool(t, b.Dsn, intakefix.RoleUnreg), intake.Options{})
	if _, err := unreg.AcceptMany(ctx, subs[:3]); !errors.Is(err, intake.ErrNotAWorkload) {
		t.Fatalf("unregistered role: %v, want ErrNotAWorkload", err)
	}
}

// ikcFillQuota marks the workload's quota as used up for the minutes around now (so the test
// does not depend on the minute it runs in).
func ikcFillQuota(t *testing.T, admin *pgx.Conn, workload string, used int) {
	t.Helper()
	intakefix.Fixture(t, admin, `INSERT INTO intake.workload_minutes (workload_principal_id, minute, accepted)
		SELECT $1, date_trunc('minute', now()) + k * interval '1 minute', $2 FROM generate_series(-1, 5) AS k
		ON CONFLICT (workload_principal_id, minute) DO UPDATE SET accepted = EXCLUDED.accepted`, workload, used)
}

// ikcWaits records the delays the sender asked its Sleep hook for; after is run on the first.
type ikcWaits struct {
	mu    sync.Mutex
	waits []time.Duration
	first func()
}

func (w *ikcWaits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.waits = append(w.waits, d)
	first := len(w.waits) == 1
	w.mu.Unlock()
	if first && w.first != nil {
		w.first()
	}
	return ctx.Err()
}

func (w *ikcWaits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits...)
}

// R-OB-6: items the rate quota rejects (OB703 retryAfterSeconds=N) are resubmitted after the
// delay the intake names (the sender asks to wait 1..60 s), not hammered, and are not lost: once
// the quota has room again (the test frees it on the first wait) all 5 are accepted_new.
func TestIntakeClientQuotaRetryAfterNotLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 10})
	hook := testdb.Conn(t, b.Dsn, "")
	// the hook frees the quota below the kernel's triggers (a fixture: no role may do it since migration 044)
	if _, err := hook.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	ikcFillQuota(t, b.Admin, intakefix.WorkloadA, 10)
	w := &ikcWaits{first: func() {
		if _, err := hook.Exec(context.Background(), `DELETE FROM intake.workload_minutes WHERE workload_principal_id = $1`, intakefix.WorkloadA); err != nil {
			t.Error(err)
		}
	}}
	c, reg := ikcClient(t, ikcPool(t, b.Dsn, intakefix.RoleA), intake.Options{Sleep: w.sleep})
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = testfix.NewUUID()
		if !c.Send(ikcSub(t, ids[i])) {
			t.Fatalf("Send %d refused", i)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waits := w.all()
	if len(waits) == 0 {
		t.Fatal("the sender never waited for retryAfterSeconds")
	}
	for _, d := range waits {
		if d < time.Second || d > time.Minute {
			t.Fatalf("waited %v, want retryAfterSeconds within 1..60 s", d)
		}
	}
	if got := ikcMetric(t, reg, "outcomes_total", intake.OutcomeAcceptedNew); got != 5 {
		t.Fatalf("outcomes_total{accepted_new} = %v, want 5", got)
	}
	if got := ikcMetric(t, reg, "retries_total", intake.ReasonQuota); got < 1 || got > 5 {
		t.Fatalf("retries_total{quota} = %v, want 1..5", got)
	}
	if got := ikcMetric(t, reg, "send_failures_total", intake.ReasonQuota); got != 0 {
		t.Fatalf("send_failures_total{quota} = %v, want 0", got)
	}
	if got := ikcMetric(t, reg, "rejections_total", "OB703"); got != 0 {
		t.Fatalf("rejections_total{OB703} = %v: a retried quota rejection is not final", got)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations WHERE observation_id = ANY ($1::uuid[])`, ids); n != 5 {
		t.Fatalf("%d of 5 observations stored", n)
	}
}

// R-OB-6, R-OB-5: with the quota used up for good, every item is resubmitted exactly
// MaxQuotaRetries times, then counted as a send failure (reason quota) and reported: the intake
// holds a send_failures report of 4, and the auditor's health window shows 4 send failures.
func TestIntakeClientQuotaRetriesBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 2})
	ikcFillQuota(t, b.Admin, intakefix.WorkloadA, 2)
	w := &ikcWaits{}
	c, reg := ikcClient(t, ikcPool(t, b.Dsn, intakefix.RoleA), intake.Options{Sleep: w.sleep, MaxQuotaRetries: 2})
	for i := 0; i < 4; i++ {
		if !c.Send(ikcSub(t, testfix.NewUUID())) {
			t.Fatalf("Send %d refused", i)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if waits := w.all(); len(waits) < 2 {
		t.Fatalf("waited %d times, want at least 2 (one per retry round)", len(waits))
	}
	if got := ikcMetric(t, reg, "retries_total", intake.ReasonQuota); got != 8 {
		t.Fatalf("retries_total{quota} = %v, want 8 (4 items × 2)", got)
	}
	if got := ikcMetric(t, reg, "send_failures_total", intake.ReasonQuota); got != 4 {
		t.Fatalf("send_failures_total{quota} = %v, want 4", got)
	}
	if got := ikcMetric(t, reg, "outcomes_total", intake.OutcomeAcceptedNew); got != 0 {
		t.Fatalf("outcomes_total{accepted_new} = %v, want 0", got)
	}
	if got := ikcMetric(t, reg, "send_failure_reports_total", "ok"); got != 1 {
		t.Fatalf("send_failure_reports_total{ok} = %v, want 1", got)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT coalesce(sum(failed), 0)::int FROM intake.send_failures
		WHERE workload_principal_id = $1 AND reason = 'quota'`, intakefix.WorkloadA); n != 4 {
		t.Fatalf("reported %d quota send failures, want 4", n)
	}
	from := time.Now().Add(-time.Hour).Truncate(time.Minute)
	hw, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, from, from.Add(3*time.Hour), 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	failures := 0
	for _, h := range hw {
		if h.WorkloadPrincipalID == intakefix.WorkloadA {
			failures += h.SendFailures
			if h.SendFailures > 0 && h.Health != "degraded" {
				t.Fatalf("health %s with send failures", h.Health)
			}
		}
	}
	if failures != 4 {
		t.Fatalf("health windows show %d send failures, want 4", failures)
	}
}

// The background buffer is bounded: with the sender's call held inside the database (the test
// locks intake.workload_minutes) and 3 items buffered, Send returns false at once and the drops
// are counted (queue_full). Killing the held backend is a transient error: the batch is retried
// after a backoff, not lost. Close flushes the 4 queued items and reports the 2 drops through
// intake.record_send_failures; a Send after Close is refused and counted (closed).
func TestIntakeClientBufferFullAndConnectionLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	w := &ikcWaits{}
	c, reg := ikcClient(t, ikcPool(t, b.Dsn, intakefix.RoleA), intake.Options{BufferSize: 3, Sleep: w.sleep, InitialBackoff: 100 * time.Millisecond})

	locker := testdb.Conn(t, b.Dsn, "")
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE intake.workload_minutes IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = testfix.NewUUID()
	}
	if !c.Send(ikcSub(t, ids[0])) {
		t.Fatal("Send 0 refused")
	}
	pid := ikcWaitLockWaiter(t, b.Admin, "intake.workload_minutes", 0) // the sender holds item 0
	for i := 1; i <= 3; i++ {
		if !c.Send(ikcSub(t, ids[i])) {
			t.Fatalf("Send %d refused with room in the buffer", i)
		}
	}
	for i := 4; i <= 5; i++ {
		if c.Send(ikcSub(t, ids[i])) {
			t.Fatalf("Send %d queued into a full buffer", i)
		}
	}
	if got := ikcMetric(t, reg, "send_failures_total", intake.ReasonQueueFull); got != 2 {
		t.Fatalf("send_failures_total{queue_full} = %v, want 2", got)
	}
	if got := ikcMetric(t, reg, "buffered", ""); got != 3 {
		t.Fatalf("buffered = %v, want 3", got)
	}

	if _, err := b.Admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	ikcWaitLockWaiter(t, b.Admin, "intake.workload_minutes", pid) // resubmitted on a new connection
	if got := ikcMetric(t, reg, "retries_total", intake.ReasonUnavailable); got != 1 {
		t.Fatalf("retries_total{unavailable} = %v, want 1 (the batch of item 0)", got)
	}
	if waits := w.all(); len(waits) != 1 || waits[0] < 50*time.Millisecond || waits[0] > 100*time.Millisecond {
		t.Fatalf("backoff waits %v, want one in [50ms, 100ms]", waits)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if got := ikcMetric(t, reg, "outcomes_total", intake.OutcomeAcceptedNew); got != 4 {
		t.Fatalf("outcomes_total{accepted_new} = %v, want 4", got)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observations WHERE observation_id = ANY ($1::uuid[])`, ids[:4]); n != 4 {
		t.Fatalf("%d of the 4 queued observations stored", n)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_ids WHERE observation_id = ANY ($1::uuid[])`, ids[4:]); n != 0 {
		t.Fatalf("%d dropped observations stored", n)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT coalesce(sum(failed), 0)::int FROM intake.send_failures
		WHERE workload_principal_id = $1 AND reason = 'queue_full' AND window_end > window_start`, intakefix.WorkloadA); n != 2 {
		t.Fatalf("reported %d queue_full send failures, want 2", n)
	}
	if c.Send(ikcSub(t, testfix.NewUUID())) {
		t.Fatal("Send after Close queued")
	}
	if got := ikcMetric(t, reg, "send_failures_total", intake.ReasonClosed); got != 1 {
		t.Fatalf("send_failures_total{closed} = %v, want 1", got)
	}
}
