package kernel

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// dxSleepPast makes the database clock pass t (pg_sleep on the given connection).
func dxSleepPast(t *testing.T, db pgcall.DBTX, until time.Time) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		now := kernelfix.DBNow(t, db)
		if now.After(until) {
			return
		}
		d := until.Sub(now) + 20*time.Millisecond
		if _, err := db.Exec(ctx, `SELECT pg_sleep($1::float8)`, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("database clock did not pass %v", until)
}

// dxStaleCalls runs renew, ack, retry and quarantine with fence f and asserts each is rejected
// with OB001 and leaves the delivery row and the finishes unchanged (R-CL-3, R-CL-4).
func dxStaleCalls(t *testing.T, b kernelfix.Bundle, db pgcall.DBTX, c pgcall.ClaimedDelivery, f pgcall.Fence) {
	t.Helper()
	ctx := context.Background()
	before := kernelfix.Row(t, b.Admin, c.Destination, c.EventID)
	finishes := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes`)
	quarantined := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine`)
	ack, rc := kernelfix.ValidAck(t, c)
	ref := "late"
	calls := map[string]func() error{
		"renew": func() error { _, err := pgcall.RenewLease(ctx, db, f, time.Minute); return err },
		"ack":   func() error { _, err := pgcall.AckDelivery(ctx, db, f, ack, rc); return err },
		"retry": func() error { _, err := pgcall.RetryDelivery(ctx, db, f, "consumer_timeout", &ref); return err },
		"quarantine": func() error {
			return pgcall.QuarantineDelivery(ctx, db, f, "consumer_rejected", "consumer_rejected", nil)
		},
	}
	for _, name := range []string{"renew", "ack", "retry", "quarantine"} {
		err := calls[name]()
		if err == nil {
			t.Fatalf("stale %s succeeded", name)
		}
		kernelfix.WantFencing(t, err)
	}
	if after := kernelfix.Row(t, b.Admin, c.Destination, c.EventID); after != before {
		t.Fatalf("row changed by rejected calls:\nbefore %s\nafter  %s", before, after)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes`); n != finishes {
		t.Fatalf("finishes %d -> %d after rejected calls", finishes, n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine`); n != quarantined {
		t.Fatalf("quarantine rows %d -> %d after rejected calls", quarantined, n)
	}
}

// T-2, R-CL-2, R-CL-3, R-CL-4, R-AK-8: the old worker's lease expires; recovery closes its
// attempt as lease_expired_unknown; a new worker claims (attempt 2); the old worker's renew,
// ack, retry and quarantine all fail with OB001 and change nothing; the new worker's ack wins.
func TestFencingOldWorkerAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	oldW := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	newW := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)

	old := kernelfix.ClaimOne(t, oldW, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
	dxSleepPast(t, newW, old.LeaseExpiresAt)

	// Expired but not yet recovered: the old fence already fails, nothing changes.
	dxStaleCalls(t, b, oldW, old, kernelfix.FenceOf(old))

	n, err := pgcall.RecoverExpiredLeases(ctx, newW, 100)
	if err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	if o, d := kernelfix.Finish(t, b.Admin, old.AttemptID); o != "lease_expired_unknown" || d != "reclaimable" {
		t.Fatalf("old attempt finish %s/%s", o, d)
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "pending" {
		t.Fatalf("status after recovery %s", s)
	}
	if n, err := pgcall.RecoverExpiredLeases(ctx, newW, 100); err != nil || n != 0 {
		t.Fatalf("second recovery: %d %v", n, err)
	}

	cur := kernelfix.ClaimOne(t, newW, kernelfix.WorkerB, time.Minute, kernelfix.DestMetering)
	if cur.EventID != eventID || cur.AttemptNumber != 2 || cur.AttemptID == old.AttemptID || cur.LeaseToken == old.LeaseToken {
		t.Fatalf("new claim %+v", cur)
	}

	// The old worker is fenced out of the new lease.
	dxStaleCalls(t, b, oldW, old, kernelfix.FenceOf(old))
	// ... also when it presents its old token with the new attempt, or the new token with its old attempt.
	dxStaleCalls(t, b, oldW, old, pgcall.Fence{Destination: old.Destination, EventID: old.EventID, AttemptID: cur.AttemptID, LeaseToken: old.LeaseToken})
	dxStaleCalls(t, b, oldW, old, pgcall.Fence{Destination: old.Destination, EventID: old.EventID, AttemptID: old.AttemptID, LeaseToken: cur.LeaseToken})

	if res := kernelfix.Ack(t, newW, cur); res != "complete" {
		t.Fatalf("new worker ack: %s", res)
	}
	if o, _ := kernelfix.Finish(t, b.Admin, cur.AttemptID); o != "acknowledged" {
		t.Fatalf("new attempt finish %s", o)
	}
	if n := kernelfix.Finishes(t, b.Admin, old.AttemptID); n != 1 {
		t.Fatalf("old attempt has %d finishes", n)
	}
	// After the ack, the finished fence is rejected too (no second finish).
	dxStaleCalls(t, b, newW, cur, kernelfix.FenceOf(cur))
}

// T-2, R-CL-3: a claim in the same call recovers expired leases of its destinations first, so
// a lone dispatcher needs no separate recovery loop.
func TestClaimRecoversExpiredLeasesItself(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	old := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
	dxSleepPast(t, b.Disp, old.LeaseExpiresAt)
	// A claim for another destination does not touch it.
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerB, 10, time.Minute, kernelfix.DestCoord); len(cs) != 0 {
		t.Fatalf("claimed %d on another destination", len(cs))
	}
	if n := kernelfix.Finishes(t, b.Admin, old.AttemptID); n != 0 {
		t.Fatalf("a claim of another destination recovered this lease")
	}
	cur := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerB, time.Minute, kernelfix.DestMetering)
	if cur.EventID != old.EventID || cur.AttemptNumber != 2 {
		t.Fatalf("reclaim %+v", cur)
	}
	if o, d := kernelfix.Finish(t, b.Admin, old.AttemptID); o != "lease_expired_unknown" || d != "reclaimable" {
		t.Fatalf("old attempt finish %s/%s", o, d)
	}
}

// T-2, R-CL-3: a wrong token, a wrong attempt id, the token/attempt of another delivery, an
// unknown delivery - each is rejected with OB001 and changes nothing; the right fence works.
func TestFencingWrongFence(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-2", 1)
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 2, time.Minute, kernelfix.DestMetering)
	if len(cs) != 2 {
		t.Fatalf("claimed %d", len(cs))
	}
	c, other := cs[0], cs[1]
	f := kernelfix.FenceOf(c)
	wrong := map[string]pgcall.Fence{
		"wrong token":            {Destination: f.Destination, EventID: f.EventID, AttemptID: f.AttemptID, LeaseToken: testfix.NewUUID()},
		"wrong attempt":          {Destination: f.Destination, EventID: f.EventID, AttemptID: testfix.NewUUID(), LeaseToken: f.LeaseToken},
		"other delivery's token": {Destination: f.Destination, EventID: f.EventID, AttemptID: f.AttemptID, LeaseToken: other.LeaseToken},
		"other delivery's fence": {Destination: f.Destination, EventID: f.EventID, AttemptID: other.AttemptID, LeaseToken: other.LeaseToken},
		"wrong destination":      {Destination: kernelfix.DestCoord, EventID: f.EventID, AttemptID: f.AttemptID, LeaseToken: f.LeaseToken},
		"unknown event":          {Destination: f.Destination, EventID: testfix.NewUUID(), AttemptID: f.AttemptID, LeaseToken: f.LeaseToken},
	}
	for name, wf := range wrong {
		t.Run(name, func(t *testing.T) { dxStaleCalls(t, b, b.Disp, c, wf) })
	}
	// The correct fence still renews and then acks.
	exp, err := pgcall.RenewLease(ctx, b.Disp, f, 2*time.Minute)
	if err != nil || !exp.After(c.LeaseExpiresAt) {
		t.Fatalf("renew: %v %v (was %v)", exp, err, c.LeaseExpiresAt)
	}
	if res := kernelfix.Ack(t, b.Disp, c); res != "complete" {
		t.Fatalf("ack %s", res)
	}
	_, err = pgcall.RenewLease(ctx, b.Disp, kernelfix.FenceOf(other), 10*time.Millisecond)
	kernelfix.WantState(t, err, kernelfix.SQLStateParam)
}

// R-CL-3, R-SEC-3: at most one finish per attempt start is a constraint, not only code; starts
// and finishes are append-only for every role, the owner included.
func TestAttemptsImmutable(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	kernelfix.Ack(t, b.Disp, c)

	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	_, err := owner.Exec(ctx, `INSERT INTO outbox.outbox_delivery_attempt_finishes (attempt_id, outcome, retry_disposition)
		VALUES ($1::uuid, 'lease_expired_unknown', 'reclaimable')`, c.AttemptID)
	kernelfix.WantState(t, err, "23505")
	for _, stmt := range []string{
		`UPDATE outbox.outbox_delivery_attempt_finishes SET outcome = 'retryable' WHERE attempt_id = $1::uuid`,
		`DELETE FROM outbox.outbox_delivery_attempt_finishes WHERE attempt_id = $1::uuid`,
		`UPDATE outbox.outbox_delivery_attempt_starts SET worker = 'someone-else' WHERE attempt_id = $1::uuid`,
		`DELETE FROM outbox.outbox_delivery_attempt_starts WHERE attempt_id = $1::uuid`,
	} {
		_, err := owner.Exec(ctx, stmt, c.AttemptID)
		kernelfix.WantState(t, err, "OB202")
	}
	for _, tbl := range []string{"outbox_delivery_attempt_finishes", "outbox_delivery_attempt_starts"} {
		_, err := owner.Exec(ctx, `TRUNCATE outbox.`+tbl+` CASCADE`)
		kernelfix.WantState(t, err, "OB202")
	}
	// The dispatcher cannot touch the tables at all.
	_, err = b.Disp.Exec(ctx, `INSERT INTO outbox.outbox_delivery_attempt_finishes (attempt_id, outcome, retry_disposition)
		VALUES ($1::uuid, 'acknowledged', 'none')`, testfix.NewUUID())
	kernelfix.WantState(t, err, "42501")
	if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 1 {
		t.Fatalf("%d finishes", n)
	}
}

// T-2, R-AK-8: recovery racing the old worker's late ack on two real connections - whoever
// takes the row lock first wins, the other changes nothing; never two finishes for one start.
func TestFencingRecoveryRacesLateAck(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	worker := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	recoverer := testdb.Conn(t, b.Dsn, "outbox_dispatcher")

	// Permutation 1: the ack holds the row (live lease) when the lease runs out; recovery skips
	// the locked row; the ack commits; recovery then finds nothing.
	t.Run("ack first", func(t *testing.T) {
		eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-ack-first", 1)
		c := kernelfix.ClaimOne(t, worker, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
		if c.EventID != eventID {
			t.Fatalf("claimed %s", c.EventID)
		}
		tx, err := worker.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ack, rc := kernelfix.ValidAck(t, c)
		if _, err := pgcall.AckDelivery(ctx, tx, kernelfix.FenceOf(c), ack, rc); err != nil {
			tx.Rollback(ctx)
			t.Fatalf("ack within the lease: %v", err)
		}
		dxSleepPast(t, recoverer, c.LeaseExpiresAt)
		n, err := pgcall.RecoverExpiredLeases(ctx, recoverer, 100)
		if err != nil || n != 0 {
			tx.Rollback(ctx)
			t.Fatalf("recovery while the ack holds the row: %d %v", n, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := pgcall.RecoverExpiredLeases(ctx, recoverer, 100); err != nil || n != 0 {
			t.Fatalf("recovery after the ack: %d %v", n, err)
		}
		if o, _ := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "acknowledged" {
			t.Fatalf("finish %s", o)
		}
		if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 1 {
			t.Fatalf("%d finishes", n)
		}
		if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "acknowledged" {
			t.Fatalf("status %s", s)
		}
	})

	// Permutation 2: recovery holds the row; the late ack waits for the lock (asserted through
	// pg_locks, no sleeps), then sees the recovered row and is rejected with OB001.
	t.Run("recovery first", func(t *testing.T) {
		eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-recovery-first", 1)
		c := kernelfix.ClaimOne(t, worker, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
		if c.EventID != eventID {
			t.Fatalf("claimed %s", c.EventID)
		}
		dxSleepPast(t, recoverer, c.LeaseExpiresAt)
		tx, err := recoverer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if n, err := pgcall.RecoverExpiredLeases(ctx, tx, 100); err != nil || n != 1 {
			t.Fatalf("recovery: %d %v", n, err)
		}
		var workerPID int
		if err := worker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&workerPID); err != nil {
			t.Fatal(err)
		}
		ack, rc := kernelfix.ValidAck(t, c)
		done := make(chan error, 1)
		go func() {
			_, err := pgcall.AckDelivery(ctx, worker, kernelfix.FenceOf(c), ack, rc)
			done <- err
		}()
		dxWaitBlocked(t, b.Admin, workerPID)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		kernelfix.WantFencing(t, <-done)
		if o, _ := kernelfix.Finish(t, b.Admin, c.AttemptID); o != "lease_expired_unknown" {
			t.Fatalf("finish %s", o)
		}
		if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 1 {
			t.Fatalf("%d finishes", n)
		}
		if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "pending" {
			t.Fatalf("status %s", s)
		}
		// Redelivery converges: the new attempt acks.
		cur := kernelfix.ClaimOne(t, worker, kernelfix.WorkerB, time.Minute, kernelfix.DestMetering)
		if cur.EventID != eventID || cur.AttemptNumber != 2 {
			t.Fatalf("reclaim %+v", cur)
		}
		kernelfix.Ack(t, worker, cur)
	})

	// Free race: ack and recovery released together by a barrier around the expiry. Exactly one
	// of them wins, whichever it is; never two finishes for the attempt.
	t.Run("free race", func(t *testing.T) {
		// Release moments around the expiry, so that both outcomes occur across rounds.
		offsets := []time.Duration{-3 * time.Millisecond, 0, 2 * time.Millisecond, 10 * time.Millisecond}
		for i, off := range offsets {
			eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-race", int64(i+1))
			c := kernelfix.ClaimOne(t, worker, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
			if c.EventID != eventID {
				t.Fatalf("claimed %s", c.EventID)
			}
			ack, rc := kernelfix.ValidAck(t, c)
			start := make(chan struct{})
			var wg sync.WaitGroup
			var ackErr, recErr error
			var recovered int
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				_, ackErr = pgcall.AckDelivery(ctx, worker, kernelfix.FenceOf(c), ack, rc)
			}()
			go func() {
				defer wg.Done()
				<-start
				// Recovery only acts on an expired lease: poll until it does or the ack won
				// (admin is free: the test goroutine waits in wg.Wait).
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					recovered, recErr = pgcall.RecoverExpiredLeases(ctx, recoverer, 100)
					if recErr != nil || recovered > 0 {
						return
					}
					var status string
					if recErr = b.Admin.QueryRow(ctx, `SELECT status FROM outbox.outbox_deliveries WHERE destination = $1 AND event_id = $2::uuid`,
						kernelfix.DestMetering, eventID).Scan(&status); recErr != nil || status != "leased" {
						return
					}
				}
			}()
			time.Sleep(time.Until(c.LeaseExpiresAt.Add(off)))
			close(start)
			wg.Wait()
			if recErr != nil {
				t.Fatalf("recovery: %v", recErr)
			}
			ackWon := ackErr == nil
			t.Logf("round %d: ack won=%v, recovered=%d", i, ackWon, recovered)
			if !ackWon {
				kernelfix.WantFencing(t, ackErr)
			}
			if ackWon == (recovered == 1) {
				t.Fatalf("round %d: ack won=%v, recovered=%d - want exactly one winner", i, ackWon, recovered)
			}
			if n := kernelfix.Finishes(t, b.Admin, c.AttemptID); n != 1 {
				t.Fatalf("round %d: %d finishes", i, n)
			}
			o, _ := kernelfix.Finish(t, b.Admin, c.AttemptID)
			want, wantStatus := "lease_expired_unknown", "pending"
			if ackWon {
				want, wantStatus = "acknowledged", "acknowledged"
			}
			if o != want || kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID) != wantStatus {
				t.Fatalf("round %d: finish %s status %s", i, o, kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID))
			}
			if !ackWon { // clean up for the next round: reclaim and ack
				kernelfix.Ack(t, worker, kernelfix.ClaimOne(t, worker, kernelfix.WorkerB, time.Minute, kernelfix.DestMetering))
			}
		}
	})
}

// dxWaitBlocked waits (bounded) until backend pid waits for a lock.
func dxWaitBlocked(t *testing.T, admin pgcall.DBTX, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		if err := admin.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("backend %d never waited for a lock", pid)
}
