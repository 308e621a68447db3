package dispatcher

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// recorder is a fake batch call: it records the size of every group it is given and accepts
// every item.
type recorder struct {
	mu    sync.Mutex
	sizes []int
}

func (r *recorder) call(g []pendingOutcome[int]) []outcomeResult {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(g))
	r.mu.Unlock()
	res := make([]outcomeResult, len(g))
	for i := range g {
		res[i] = outcomeResult{outcome: "ok"}
	}
	return res
}

func (r *recorder) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

// waitResult bounds a wait that must not depend on the flush interval (set to an hour here).
func waitResult(t *testing.T, ch <-chan outcomeResult, what string) outcomeResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no result (it waited for the flush interval)", what)
		return outcomeResult{}
	}
}

// R-AK-9: a lone outcome (no other delivery running) is recorded at once with the one-row call,
// whatever the flush interval.
func TestBatcherLoneOutcomeNotDelayed(t *testing.T) {
	t.Parallel()
	var rec recorder
	running := atomic.Int64{}
	running.Store(1)
	b := &batcher[int]{op: "ack", interval: time.Hour, max: 32, idle: func() bool { return running.Load() == 0 }, call: rec.call}
	ch := make(chan outcomeResult, 1)
	go func() {
		ch <- b.submit(1, pgcall.Fence{}, func() bool { return running.Add(-1) == 0 }, func() {})
	}()
	if r := waitResult(t, ch, "lone outcome"); !r.single {
		t.Fatalf("a group of one must be recorded with the one-row call: %+v", r)
	}
	if c := rec.calls(); len(c) != 0 {
		t.Fatalf("batch calls %v for a lone outcome", c)
	}
}

// R-AK-9: outcomes of deliveries that finish together share one call; the group is recorded as
// soon as the last running delivery hands over its outcome (no interval wait), or when full.
func TestBatcherGroupsOutcomesFinishingTogether(t *testing.T) {
	t.Parallel()
	const n = 10
	var rec recorder
	running := atomic.Int64{}
	running.Store(n)
	b := &batcher[int]{op: "ack", interval: time.Hour, max: 32, idle: func() bool { return running.Load() == 0 }, call: rec.call}
	results := make(chan outcomeResult, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			results <- b.submit(i, pgcall.Fence{}, func() bool { return running.Add(-1) == 0 }, func() {})
		}(i)
	}
	for i := 0; i < n; i++ {
		if r := waitResult(t, results, "grouped outcome"); r.single || r.outcome != "ok" {
			t.Fatalf("result %+v", r)
		}
	}
	if c := rec.calls(); len(c) != 1 || c[0] != n {
		t.Fatalf("calls %v, want one call of %d", c, n)
	}

	// Full groups go at once even while others still run.
	var rec2 recorder
	running.Store(100)
	b2 := &batcher[int]{op: "ack", interval: time.Hour, max: 4, idle: func() bool { return running.Load() == 0 }, call: rec2.call}
	for i := 0; i < 8; i++ {
		go func(i int) {
			results <- b2.submit(i, pgcall.Fence{}, func() bool { running.Add(-1); return false }, func() {})
		}(i)
	}
	for i := 0; i < 8; i++ {
		waitResult(t, results, "full group")
	}
	if c := rec2.calls(); len(c) != 2 || c[0] != 4 || c[1] != 4 {
		t.Fatalf("calls %v, want two full groups of 4", c)
	}
}

// The flush interval bounds the wait of a group while other deliveries still run; a kick (the
// last running delivery ended without an outcome) records it at once.
func TestBatcherIntervalAndKick(t *testing.T) {
	t.Parallel()
	var rec recorder
	b := &batcher[int]{op: "retry", interval: 20 * time.Millisecond, max: 32, idle: func() bool { return false }, call: rec.call}
	results := make(chan outcomeResult, 3)
	for i := 0; i < 3; i++ {
		go func(i int) { results <- b.submit(i, pgcall.Fence{}, func() bool { return false }, func() {}) }(i)
	}
	for i := 0; i < 3; i++ {
		waitResult(t, results, "interval flush")
	}
	if c := rec.calls(); len(c) == 0 || len(c) > 3 {
		t.Fatalf("calls %v", c)
	}

	var rec2 recorder
	b2 := &batcher[int]{op: "retry", interval: time.Hour, max: 32, idle: func() bool { return false }, call: rec2.call}
	var joined sync.WaitGroup
	joined.Add(2)
	for i := 0; i < 2; i++ {
		go func(i int) {
			results <- b2.submit(i, pgcall.Fence{}, func() bool { joined.Done(); return false }, func() {})
		}(i)
	}
	joined.Wait()
	b2.kick()
	for i := 0; i < 2; i++ {
		waitResult(t, results, "kicked group")
	}
	if c := rec2.calls(); len(c) != 1 || c[0] != 2 {
		t.Fatalf("calls %v, want one call of 2", c)
	}
}

func testDispatcher() *Dispatcher {
	return &Dispatcher{cfg: &config.Config{StatementTimeout: time.Second}, m: metrics.New(),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), dbSlots: make(chan struct{}, 2), hard: context.Background()}
}

func group(n int) []pendingOutcome[int] {
	g := make([]pendingOutcome[int], n)
	for i := range g {
		g[i] = pendingOutcome[int]{item: i, fence: pgcall.Fence{Destination: "d", EventID: string(rune('a' + i)), AttemptID: "x"}}
	}
	return g
}

// R-AK-9: item rejections map to the one-row call's errors (fencing, ack rejected, shape); a
// whole-call failure or rows that do not match the items send every item back to be recorded
// one by one.
func TestBatchCallResults(t *testing.T) {
	t.Parallel()
	d := testDispatcher()
	g := group(4)
	rows := []pgcall.ItemOutcome{
		{Destination: "d", EventID: "a", AttemptID: "x", Outcome: "complete"},
		{Destination: "d", EventID: "b", AttemptID: "x", Outcome: "rejected", SQLState: "OB001", Detail: "lease token mismatch"},
		{Destination: "d", EventID: "c", AttemptID: "x", Outcome: "rejected", SQLState: "OB002", Detail: `receipt {"secret":1}`},
		{Destination: "d", EventID: "d", AttemptID: "x", Outcome: "rejected", SQLState: "22023", Detail: "item 4: shape"},
	}
	res := batchCall(d, "ack", g, func(ctx context.Context, items []int) ([]pgcall.ItemOutcome, error) { return rows, nil })
	if res[0].err != nil || res[0].outcome != "complete" || res[0].single {
		t.Fatalf("accepted item: %+v", res[0])
	}
	if !errors.Is(res[1].err, pgcall.ErrFencingRejected) || pgcall.SQLState(res[1].err) != "OB001" {
		t.Fatalf("fenced item: %v", res[1].err)
	}
	if !errors.Is(res[2].err, pgcall.ErrAckRejected) || !isDocumentRejection(res[2].err) {
		t.Fatalf("ack-rejected item: %v", res[2].err)
	}
	if s := safeErr(res[2].err); s == "" || strings.Contains(s, "secret") {
		t.Fatalf("item detail leaks into logs: %q", s)
	}
	if !isDocumentRejection(res[3].err) || errors.Is(res[3].err, pgcall.ErrFencingRejected) {
		t.Fatalf("shape-rejected item: %v", res[3].err)
	}
	if c, sum := histogram(t, d.m, "ack"); c != 1 || sum != 4 {
		t.Fatalf("outcome_batch_size{ack}: %d calls carrying %g items, want 1 call of 4", c, sum)
	}

	for name, call := range map[string]func(context.Context, []int) ([]pgcall.ItemOutcome, error){
		"whole-call error": func(context.Context, []int) ([]pgcall.ItemOutcome, error) { return nil, errors.New("conn lost") },
		"short answer":     func(context.Context, []int) ([]pgcall.ItemOutcome, error) { return rows[:3], nil },
		"rows out of order": func(context.Context, []int) ([]pgcall.ItemOutcome, error) {
			return []pgcall.ItemOutcome{rows[1], rows[0], rows[2], rows[3]}, nil
		},
	} {
		for i, r := range batchCall(d, "ack", g, call) {
			if !r.single || r.err != nil {
				t.Errorf("%s: item %d = %+v, want recorded one by one", name, i, r)
			}
		}
	}
}

func histogram(t *testing.T, m *metrics.Metrics, op string) (uint64, float64) {
	t.Helper()
	var pb dto.Metric
	if err := m.OutcomeBatchSize.WithLabelValues(op).(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
}

// Issue 21 item 1, R-AK-9 (group commit): with one batch call allowed at a time, the outcomes
// that arrive while a call runs are not sent as calls of their own but grow the next group,
// which is recorded as soon as the running call returns - whatever the flush interval.
func TestBatcherGroupCommitWhileACallRuns(t *testing.T) {
	t.Parallel()
	var sizes []int
	var mu sync.Mutex
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	call := func(g []pendingOutcome[int]) []outcomeResult {
		mu.Lock()
		sizes = append(sizes, len(g))
		first := len(sizes) == 1
		mu.Unlock()
		entered <- struct{}{}
		if first {
			<-release // the first call runs until the test lets it go
		}
		res := make([]outcomeResult, len(g))
		for i := range g {
			res[i] = outcomeResult{outcome: "ok"}
		}
		return res
	}
	b := &batcher[int]{op: "ack", interval: time.Hour, max: 2, maxCalls: 1, idle: func() bool { return false }, call: call}
	results := make(chan outcomeResult, 7)
	submit := func(i int) { results <- b.submit(i, pgcall.Fence{}, func() bool { return false }, func() {}) }
	go submit(1)
	go submit(2) // full group of 2: the first call starts
	<-entered    // barrier: the first call is running
	for i := 3; i <= 7; i++ {
		go submit(i) // five outcomes arrive while it runs: max 2 per call, so 2 + 2 + 1 follow
	}
	// barrier: all five are in the open group (state, not time)
	for {
		b.mu.Lock()
		n := len(b.group)
		b.mu.Unlock()
		if n == 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	if len(sizes) != 1 {
		t.Fatalf("%d calls started while one was running (want none: at most one at a time)", len(sizes)-1)
	}
	mu.Unlock()
	close(release)
	for i := 0; i < 7; i++ {
		r := waitResult(t, results, "outcome")
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// the groups that grew meanwhile were recorded right after, without the hour's interval; the
	// last one (a single item) goes to the one-row call
	if len(sizes) != 3 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 2 {
		t.Fatalf("batch calls %v, want [2 2 2] (then one item alone)", sizes)
	}
}
