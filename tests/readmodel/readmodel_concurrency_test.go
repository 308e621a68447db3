package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference/scenario"
)

// R-OP-2, concurrency (step by step, real connections): a producer's append and a dispatcher's
// ack that commit after the auditor's snapshot began are both invisible to the proof (members
// {E0}, E0's delivery still non-terminal), a second proof in the same transaction is
// byte-identical, and after the auditor commits the proof is stale.
func TestCompletenessSnapshotIsolationSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rmSetup(t)
	e0 := kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-c-0", 1)
	c0 := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)

	// session P: append E1, uncommitted
	p := testdb.Conn(t, b.Dsn, "")
	ptx, err := p.Begin(ctx)
	testfix.Must(t, err)
	defer func() { _ = ptx.Rollback(ctx) }()
	e1 := testfix.Append(t, ptx, testfix.Envelope(kernelfix.Metering, "1", "att-c-1", 1))
	// session D: ack E0, uncommitted
	dtx, err := b.Disp.Begin(ctx)
	testfix.Must(t, err)
	defer func() { _ = dtx.Rollback(ctx) }()
	ack, rc := kernelfix.ValidAck(t, c0)
	if _, err := pgcall.AckDelivery(ctx, dtx, kernelfix.FenceOf(c0), ack, rc); err != nil {
		t.Fatal(err)
	}
	// session A: the snapshot starts now
	atx, err := b.aud.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	testfix.Must(t, err)
	defer func() { _ = atx.Rollback(ctx) }()
	if _, err := atx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	// P and D commit while A is open
	testfix.Must(t, ptx.Commit(ctx))
	testfix.Must(t, dtx.Commit(ctx))
	s1, err := pgcall.TakeCompletenessSnapshot(ctx, atx, json.RawMessage(`{}`))
	testfix.Must(t, err)
	s2, err := pgcall.TakeCompletenessSnapshot(ctx, atx, json.RawMessage(`{}`))
	testfix.Must(t, err)
	testfix.Must(t, atx.Commit(ctx))
	if s1.ManifestSHA256 != s2.ManifestSHA256 || s1.Status != rmPartial {
		t.Fatalf("one snapshot, two manifests or wrong status: %+v %+v", s1, s2)
	}
	m := rmRead(t, b.aud, s1)
	if m.MemberCount != 1 || m.Members[0].EventID != e0 || rmGuardCount(t, m, "nonTerminalDeliveries") != 1 {
		t.Fatalf("the proof saw work committed after its snapshot: %s", m.Raw)
	}
	if f := rmCheck(t, b.aud, s1.ManifestID); f != "stale/source_changed" {
		t.Fatalf("after the commits: %s", f)
	}
	_, m2 := rmExpect(t, b, "after", `{}`, rmPartial, "nonTerminalDeliveries") // E1 pending
	if m2.MemberCount != 2 || (m2.Members[0].EventID != e1 && m2.Members[1].EventID != e1) {
		t.Fatalf("new proof: %s", m2.Raw)
	}
}

// R-OP-2, concurrency (load): proofs taken while two producers append business transactions
// and the dispatcher acks through the reference consumers are internally consistent: each
// business transaction's events are all members or none, a second proof in the same
// transaction is byte-identical, counts and set digests agree with the member list; once
// drained the proof is complete and verified_current.
func TestCompletenessSnapshotUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := rmWorldSetup(t)
	w.startDispatcher(t)
	var mu sync.Mutex
	var groups [][]string
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		conn := testdb.Conn(t, w.Dsn, "outbox_producer")
		p := scenario.Producer{Conn: conn, Prefix: fmt.Sprintf("l%d", i), Committed: func(ids []string) {
			mu.Lock()
			groups = append(groups, append([]string(nil), ids...))
			mu.Unlock()
		}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start // barrier: producers start together once the auditor is ready
			errs <- p.Runs(ctx, 1, 5)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(start)
	var proofs []pgcall.CompletenessSnapshot
	for running := true; running || len(proofs) < 3; {
		select {
		case <-done:
			running = false
		default:
		}
		tx, err := w.aud.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		testfix.Must(t, err)
		s1, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{}`))
		testfix.Must(t, err)
		s2, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(`{}`))
		testfix.Must(t, err)
		testfix.Must(t, tx.Commit(ctx))
		if s1.ManifestSHA256 != s2.ManifestSHA256 {
			t.Fatalf("two proofs in one snapshot differ")
		}
		proofs = append(proofs, s1)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	nonEmpty := 0
	for _, s := range proofs {
		m := rmRead(t, w.aud, s) // counts and set digests agree with the member list
		in := map[string]bool{}
		for _, mb := range m.Members {
			in[mb.EventID] = true
		}
		if len(in) > 0 {
			nonEmpty++
		}
		for _, g := range groups {
			n := 0
			for _, id := range g {
				if in[id] {
					n++
				}
			}
			if n != 0 && n != len(g) {
				t.Fatalf("proof %s holds %d of the %d events of one business transaction", s.ManifestID, n, len(g))
			}
		}
		if len(in) > 0 && m.Status == rmComplete && len(in) < len(groups) {
			// complete is possible mid-load only when every member is acknowledged: check
			for _, gname := range rmGuardNames {
				if rmGuardCount(t, m, gname) != 0 {
					t.Fatalf("complete with guard %s", gname)
				}
			}
		}
	}
	if nonEmpty == 0 {
		t.Fatalf("no proof saw the load (%d proofs)", len(proofs))
	}
	w.waitDrained(t)
	s, m := rmExpect(t, w.rmBundle, "drained", `{}`, rmComplete)
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	if m.MemberCount != total {
		t.Fatalf("drained proof has %d members, %d committed", m.MemberCount, total)
	}
	if f := rmCheck(t, w.aud, s.ManifestID); f != "verified_current" {
		t.Fatal(f)
	}
}
