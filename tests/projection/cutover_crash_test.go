package projection

// T-10, R-PV-2, R-PV-3 (issue 24 item 6): kill -9 of the cutover caller at each step of the
// protocol. The caller is the real cmd/outboxctl (projection build / freeze / pause / cutover /
// rollback) in a child process, killed by SIGKILL either
//   - mid-call: the test holds a row lock the call needs (the version row, FOR SHARE, or an open
//     delivery, FOR UPDATE), waits until the child's backend waits on it (pg_stat_activity), kills
//     the child and waits until its backend has gone (client_connection_check_interval makes it
//     notice the dead client and abort), then releases the lock; or
//   - right after the call committed, before it printed its answer: a test-only failpoint
//     (internal/pgoutboxtest/failpoint, PGOUTBOX_FAILPOINTS under PGOUTBOX_TEST_MODE=1).
// After every kill the old version is active with its delivery set, or the new one is with its
// set, never between (ctInvariant), the exact registry / set / pause / proof / build state is the
// one expected for that step, a readiness proof exists only for a cutover that committed, and
// the protocol, run again, completes (a lost token is recovered by a new build, which abandons
// the half-done one).

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

var (
	ctOnce sync.Once
	ctBin  string
	ctErr  error
)

// ctOutboxctl builds cmd/outboxctl once per test binary.
func ctOutboxctl(t *testing.T) string {
	t.Helper()
	ctOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pgoutbox-t10-")
		if err != nil {
			ctErr = err
			return
		}
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", dir+string(os.PathSeparator), "github.com/oceanway/pgoutbox/cmd/outboxctl")
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			ctErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		ctBin = filepath.Join(dir, "outboxctl")
	})
	if ctErr != nil {
		t.Fatal(ctErr)
	}
	return ctBin
}

type ctWorld struct {
	projectionfix.Fixture
	bin  string
	seq  int
	lock *pgx.Conn // holds the row locks of the mid-call kills
}

// ctDSN is the fixture's URL with an application name to find the child's backends by, and a
// client connection check so that a backend whose client was killed aborts its transaction.
func (w *ctWorld) ctDSN(t *testing.T, app string) string {
	t.Helper()
	u, err := url.Parse(w.Dsn)
	testfix.Must(t, err)
	q := u.Query()
	q.Set("application_name", app)
	q.Set("options", "-c client_connection_check_interval=50")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

func (w *ctWorld) start(t *testing.T, failpoints string, args ...string) (*procfix.Proc, string) {
	t.Helper()
	w.seq++
	app := fmt.Sprintf("t10-caller-%d", w.seq)
	env := []string{"DATABASE_URL=" + w.ctDSN(t, app)}
	if failpoints != "" {
		env = append(env, "PGOUTBOX_TEST_MODE=1", "PGOUTBOX_FAILPOINTS="+failpoints)
	}
	return procfix.Start(t, app+" outboxctl "+strings.Join(args, " "), w.bin, args, env), app
}

// run runs outboxctl to its end and returns its output; wantErr: the exit status must be 1 and
// the output must contain it.
func (w *ctWorld) run(t *testing.T, wantErr string, args ...string) string {
	t.Helper()
	p, _ := w.start(t, "", args...)
	select {
	case <-p.Exited:
	case <-time.After(procfix.Deadline):
		t.Fatalf("%s did not end", p.Name)
	}
	out := strings.Join(p.Output(), "\n")
	if wantErr == "" && p.Err != nil || wantErr != "" && (p.Err == nil || !strings.Contains(out, wantErr)) {
		t.Fatalf("%s: %v (want error %q)\n%s", p.Name, p.Err, wantErr, out)
	}
	return out
}

// backendsGone waits until no backend of the killed child is left.
func (w *ctWorld) backendsGone(t *testing.T, app string) {
	t.Helper()
	deadline := time.Now().Add(procfix.Deadline)
	for consumerfix.Count(t, w.Admin, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the backends of %s do not end", app)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killAt runs outboxctl with the failpoint armed and waits for its death by SIGKILL there.
func (w *ctWorld) killAt(t *testing.T, point string, args ...string) {
	t.Helper()
	p, app := w.start(t, point+"=kill", args...)
	p.WaitKilled(t)
	p.WaitLine(t, "failpoint "+point+" hit")
	w.backendsGone(t, app)
}

// killMidCall holds the row lock lockSQL takes (in a transaction of its own), starts outboxctl,
// waits until one of its backends waits for a lock, kills the child with SIGKILL, waits until
// its backends are gone, then releases the lock.
func (w *ctWorld) killMidCall(t *testing.T, lockSQL string, lockArgs []any, args ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := w.lock.Begin(ctx)
	testfix.Must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	if n := consumerfix.Count(t, tx, `SELECT count(*) FROM (`+lockSQL+`) AS l`, lockArgs...); n != 1 {
		t.Fatalf("lock %q took %d rows, want 1", lockSQL, n)
	}
	p, app := w.start(t, "", args...)
	deadline := time.Now().Add(procfix.Deadline)
	for consumerfix.Count(t, w.Admin, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app) == 0 {
		if p.HasExited() || time.Now().After(deadline) {
			t.Fatalf("%s never waited for the held lock (exited %v: %s)", p.Name, p.HasExited(), strings.Join(p.Output(), " | "))
		}
		time.Sleep(10 * time.Millisecond)
	}
	testfix.Must(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	p.WaitKilled(t)
	w.backendsGone(t, app)
	testfix.Must(t, tx.Rollback(ctx))
}

// state: the registry (live build named or not), the active set, committed pauses, the readiness
// proofs (result and direction, in order), the builds of operations_timeline (version:state, in
// order).
func (w *ctWorld) state(t *testing.T) string {
	t.Helper()
	var s string
	testfix.Must(t, w.Admin.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(projection_version || ':' || state || CASE WHEN live_build_id IS NULL THEN '' ELSE ':live' END, ' '
		   ORDER BY projection_version) FROM outbox.projection_versions WHERE projection_name = 'operations_timeline')
		|| ' set=' || (SELECT delivery_set_version FROM outbox.delivery_set_versions WHERE status = 'active')
		|| ' paused=' || coalesce((SELECT string_agg(destination, ',' ORDER BY destination) FROM outbox.destination_claim_pauses), '')
		|| ' proofs=' || coalesce((SELECT string_agg(from_version || '>' || to_version || ':' || result, ',' ORDER BY decided_at)
		   FROM outbox.cutover_readiness_proofs), '')
		|| ' builds=' || coalesce((SELECT string_agg(projection_version || ':' || state, ',' ORDER BY started_at)
		   FROM outbox.projection_builds WHERE projection_name = 'operations_timeline'), '')`).Scan(&s))
	return s
}

// ctInvariant: never between. Exactly one active version; the active delivery set is the one
// whose operations_timeline members target it; the build of every switched proof is switched and
// no other build is; an active version names no live build.
func (w *ctWorld) invariant(t *testing.T, when string) {
	t.Helper()
	var active, set, switchedProofs, switchedBuilds, targets int
	testfix.Must(t, w.Admin.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM outbox.projection_versions WHERE projection_name = 'operations_timeline' AND state = 'active' AND live_build_id IS NULL),
		(SELECT projection_version FROM outbox.projection_versions WHERE projection_name = 'operations_timeline' AND state = 'active'),
		(SELECT delivery_set_version FROM outbox.delivery_set_versions WHERE status = 'active'),
		(SELECT count(*) FROM outbox.cutover_readiness_proofs WHERE result = 'switched'),
		(SELECT count(*) FROM outbox.projection_builds WHERE state = 'switched')`).Scan(&active, &targets, &set, &switchedProofs, &switchedBuilds))
	if active != 1 || targets != set || switchedProofs != switchedBuilds {
		t.Fatalf("%s: between versions: %d active (without live build), active version %d, active set %d (set N targets version N), %d switched proofs, %d switched builds\n%s",
			when, active, targets, set, switchedProofs, switchedBuilds, w.state(t))
	}
}

func (w *ctWorld) expect(t *testing.T, when, want string) {
	t.Helper()
	w.invariant(t, when)
	if got := w.state(t); got != want {
		t.Fatalf("%s:\n  got  %s\n  want %s", when, got, want)
	}
}

func ctField(t *testing.T, out, prefix string, field int) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			if f := strings.Fields(l); len(f) > field {
				return f[field]
			}
		}
	}
	t.Fatalf("no line %q in %q", prefix, out)
	return ""
}

func ctQuartet(q pgcall.Quartet) []string {
	return []string{strconv.Itoa(q.DeliverySetVersion), strconv.Itoa(q.DefinitionSchemaVersion), q.DigestAlgorithmVersion, q.DefinitionDigest}
}

func TestCutoverCrashEachStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := &ctWorld{Fixture: projectionfix.Setup(t), bin: ctOutboxctl(t)}
	w.lock = testdb.Conn(t, w.Dsn, "")
	q1 := cvQuartet(t, w.Admin, 1)
	q2 := projectionfix.RegisterSet2(t, w.Reg)
	a := kernelfix.Append(t, w.Admin, kernelfix.RunCreated, "run-ct-a", 1)
	b := kernelfix.Append(t, w.Admin, kernelfix.RunCreated, "run-ct-b", 1)
	for _, id := range []string{a, b} {
		testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 1, "", id)) // v1 online
	}
	const versionLock = `SELECT 1 FROM outbox.projection_versions WHERE projection_name = 'operations_timeline' AND projection_version = $1 FOR SHARE`
	build := []string{"projection", "build", "operations_timeline", "2"}
	w.expect(t, "start", "1:active 2:shadow set=1 paused= proofs= builds=")

	// 1. build, killed inside start_shadow_build (waiting for the version row): nothing happened.
	w.killMidCall(t, versionLock, []any{2}, build...)
	w.expect(t, "build killed mid-call", "1:active 2:shadow set=1 paused= proofs= builds=")
	// 2. build committed, the caller killed before printing the token: a live build nobody holds;
	// starting again abandons it.
	w.killAt(t, failpoint.ProjectionAfterBuild, build...)
	w.expect(t, "build killed after commit", "1:active 2:shadow:live set=1 paused= proofs= builds=2:building")
	out := w.run(t, "", build...)
	buildID, token := ctField(t, out, "build ", 1), ctField(t, out, "token ", 1)
	w.expect(t, "build retried", "1:active 2:shadow:live set=1 paused= proofs= builds=2:abandoned,2:building")
	if n := projectionfix.Drain(t, w.Fixture, buildID, token); n != 2 {
		t.Fatalf("the retried build handed out %d sources, want 2", n)
	}
	for _, id := range []string{a, b} {
		testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 2, token, id)) // the shadow's own receipts
	}

	// 3. freeze, killed mid-call: no boundary, the token still live.
	freeze := []string{"projection", "freeze", buildID, token}
	w.killMidCall(t, versionLock, []any{2}, freeze...)
	w.expect(t, "freeze killed mid-call", "1:active 2:shadow:live set=1 paused= proofs= builds=2:abandoned,2:building")
	if n := consumerfix.Count(t, w.Admin, `SELECT count(*) FROM outbox.cutover_boundaries`); n != 0 {
		t.Fatalf("%d boundaries after a freeze killed mid-call", n)
	}
	if _, err := pgcall.ClaimRebuildSources(ctx, w.Proj, buildID, token, 10); err != nil {
		t.Fatalf("the token after a freeze killed mid-call: %v", err)
	}
	// 4. freeze committed, the new token lost: the old one is dead; a new build recovers.
	w.killAt(t, failpoint.ProjectionAfterFreeze, freeze...)
	w.expect(t, "freeze killed after commit", "1:active 2:shadow:live set=1 paused= proofs= builds=2:abandoned,2:frozen")
	if _, err := pgcall.ClaimRebuildSources(ctx, w.Proj, buildID, token, 10); consumerfix.SQLState(err) != "OB001" {
		t.Fatalf("the pre-freeze token after the freeze committed: %v, want OB001", err)
	}
	out = w.run(t, "", build...)
	buildID, token = ctField(t, out, "build ", 1), ctField(t, out, "token ", 1)
	projectionfix.Drain(t, w.Fixture, buildID, token)
	out = w.run(t, "", "projection", "freeze", buildID, token)
	token = ctField(t, out, "token ", 1)
	w.expect(t, "freeze retried", "1:active 2:shadow:live set=1 paused= proofs= builds=2:abandoned,2:abandoned,2:frozen")
	if n := projectionfix.Drain(t, w.Fixture, buildID, token); n != 0 {
		t.Fatalf("the frozen build lacked %d boundary members", n)
	}
	// an event after the boundary, dual-applied to both versions
	c := kernelfix.Append(t, w.Admin, kernelfix.RunCreated, "run-ct-c", 1)
	testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 1, "", c))
	testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 2, token, c))

	// 5. pause committed, the caller killed: the pause stays (the runbook's cross-transaction
	// pause); the pointer has not moved.
	w.killAt(t, failpoint.ProjectionAfterPause, "projection", "pause", "core_operations", "cutover operations_timeline@2")
	w.expect(t, "pause killed after commit", "1:active 2:shadow:live set=1 paused=core_operations proofs= builds=2:abandoned,2:abandoned,2:frozen")

	// 6. cutover killed mid-transaction (cutover lock taken, waiting for the target version row):
	// rolled back whole: no proof, pointer, set and pause as before, the token still valid.
	cutover := append([]string{"projection", "cutover", buildID, token}, ctQuartet(q2)...)
	w.killMidCall(t, versionLock, []any{2}, cutover...)
	w.expect(t, "cutover killed mid-call", "1:active 2:shadow:live set=1 paused=core_operations proofs= builds=2:abandoned,2:abandoned,2:frozen")
	// 7. cutover committed, the caller killed before printing: fully switched.
	w.killAt(t, failpoint.ProjectionAfterCutover, cutover...)
	switched := "1:frozen 2:active set=2 paused= proofs=1>2:switched builds=2:abandoned,2:abandoned,2:switched"
	w.expect(t, "cutover killed after commit", switched)
	// the caller, restarted, learns it is done: its token is dead, nothing changes
	w.run(t, "OB001", cutover...)
	w.expect(t, "cutover retried after the switch", switched)

	// Rollback by the same protocol, killed at each step. An event after the switch targets @2
	// and is dual-applied to @1 (frozen, no token).
	d := kernelfix.Append(t, w.Admin, kernelfix.RunCreated, "run-ct-d", 1)
	testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 2, "", d))
	testfix.Must(t, projectionfix.Receipt(t, w.Fixture, 1, "", d))
	rollback := append([]string{"projection", "rollback", "operations_timeline", "1"}, ctQuartet(q1)...)
	// 8. killed inside the rollback build
	w.killMidCall(t, versionLock, []any{1}, rollback...)
	w.expect(t, "rollback killed in its build", switched)
	// 9. killed after its build committed
	w.killAt(t, failpoint.ProjectionAfterBuild, rollback...)
	w.expect(t, "rollback killed after its build", "1:frozen 2:active set=2 paused= proofs=1>2:switched builds=2:abandoned,2:abandoned,2:switched,1:building")
	// 10. killed after its freeze committed (the rerun abandons the half-done build)
	w.killAt(t, failpoint.ProjectionAfterFreeze, rollback...)
	w.expect(t, "rollback killed after its freeze", "1:frozen 2:active set=2 paused= proofs=1>2:switched builds=2:abandoned,2:abandoned,2:switched,1:abandoned,1:frozen")
	// 11. killed inside its cutover (waiting for an open delivery of core_operations)
	w.killMidCall(t, `SELECT 1 FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND event_id = $1::uuid AND status = 'pending' FOR UPDATE`,
		[]any{d}, rollback...)
	w.expect(t, "rollback killed in its cutover", "1:frozen 2:active set=2 paused= proofs=1>2:switched builds=2:abandoned,2:abandoned,2:switched,1:abandoned,1:abandoned,1:frozen")
	// 12. killed after its cutover committed: fully rolled back
	w.killAt(t, failpoint.ProjectionAfterCutover, rollback...)
	back := "1:active 2:frozen set=1 paused= proofs=1>2:switched,2>1:switched builds=2:abandoned,2:abandoned,2:switched,1:abandoned,1:abandoned,1:abandoned,1:switched"
	w.expect(t, "rollback killed after its cutover", back)
	// rerun: @1 is active now, refused before anything is written
	w.run(t, "is active", rollback...)
	w.expect(t, "rollback rerun after the switch", back)

	// The proofs are the two committed cutovers, forward and rollback; every event has exactly one
	// receipt under each version; the pause was resumed by the forward switch.
	var dirs string
	testfix.Must(t, w.Admin.QueryRow(ctx, `SELECT string_agg((document::json)->>'direction', ',' ORDER BY decided_at) FROM outbox.cutover_readiness_proofs`).Scan(&dirs))
	if dirs != "forward,rollback" {
		t.Fatalf("proof directions %q", dirs)
	}
	for _, id := range []string{a, b, c, d} {
		for _, v := range []int{1, 2} {
			if n := consumerfix.Count(t, w.Admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE event_id = $1::uuid AND projection_version = $2`, id, v); n != 1 {
				t.Fatalf("event %s has %d receipts under @%d, want 1", id, n, v)
			}
		}
	}
	var log string
	testfix.Must(t, w.Admin.QueryRow(ctx, `SELECT string_agg(action || ':' || coalesce(reason, '-'), ' ' ORDER BY log_id) FROM outbox.destination_claim_pause_log`).Scan(&log))
	if !strings.HasPrefix(log, "pause:cutover operations_timeline@2 resume:cutover ") || strings.Count(log, ":") != 2 {
		t.Fatalf("pause log %q: want the one pause and its resume by the switch", log)
	}
}
