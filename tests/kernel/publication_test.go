package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

func dxPublishedAt(t *testing.T, db pgcall.DBTX, eventID string) *time.Time {
	t.Helper()
	var p *time.Time
	if err := db.QueryRow(context.Background(), `SELECT (SELECT published_at FROM outbox.outbox_publications WHERE event_id = $1::uuid)`, eventID).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// T-5, R-AK-3, R-AK-4: published_at stays NULL while any mandatory delivery is open (the
// resolution event has two), is set exactly once by the last ack, and cannot be changed
// afterwards: direct UPDATE by the dispatcher fails with 42501, by the owner with OB202.
func TestPublishedAtSetOnceByLastAck(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "case-1", 1)
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid AND mandatory`, eventID); n != 2 {
		t.Fatalf("%d mandatory deliveries, want 2", n)
	}

	ops := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps)
	coord := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoord)
	if ops.EventID != eventID || coord.EventID != eventID {
		t.Fatalf("claimed %s / %s", ops.EventID, coord.EventID)
	}
	// A retry of one delivery keeps the event unpublished.
	if _, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(coord), "consumer_unavailable", nil); err != nil {
		t.Fatal(err)
	}
	if res := kernelfix.Ack(t, b.Disp, ops); res != "not_complete" {
		t.Fatalf("first ack: %s, want not_complete", res)
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p != nil {
		t.Fatalf("published_at %v with a mandatory delivery open", p)
	}
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE event_id = $1::uuid AND destination = $2`,
		eventID, kernelfix.DestCoord); err != nil {
		t.Fatal(err)
	}
	coord = kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoord)
	if res := kernelfix.Ack(t, b.Disp, coord); res != "complete" {
		t.Fatalf("last ack: %s, want complete", res)
	}
	first := dxPublishedAt(t, b.Admin, eventID)
	if first == nil {
		t.Fatal("published_at NULL after the last mandatory ack")
	}
	var delivered time.Time
	if err := b.Admin.QueryRow(ctx, `SELECT max(delivered_at) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, eventID).Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	if first.Before(delivered) {
		t.Fatalf("published_at %v before the last delivered_at %v", first, delivered)
	}

	// The dispatcher has no privilege on publications at all.
	_, err := b.Disp.Exec(ctx, `UPDATE outbox.outbox_publications SET published_at = now() WHERE event_id = $1::uuid`, eventID)
	kernelfix.WantState(t, err, "42501")
	// The owner is stopped by the trigger: re-timing, deleting (back to unpublished), a second
	// row, truncating, and forging the setting does not help once published (SPEC §2).
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	for _, stmt := range []string{
		`UPDATE outbox.outbox_publications SET published_at = now() + interval '1 second' WHERE event_id = $1::uuid`,
		`DELETE FROM outbox.outbox_publications WHERE event_id = $1::uuid`,
	} {
		_, err := owner.Exec(ctx, stmt, eventID)
		kernelfix.WantState(t, err, "OB202")
	}
	_, err = owner.Exec(ctx, `TRUNCATE outbox.outbox_publications`)
	kernelfix.WantState(t, err, "OB202")
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('pgoutbox.publishing', 'on', true)`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `UPDATE outbox.outbox_publications SET published_at = now() WHERE event_id = $1::uuid`, eventID)
	kernelfix.WantState(t, err, "OB202")
	_ = tx.Rollback(ctx)
	if p := dxPublishedAt(t, b.Admin, eventID); p == nil || !p.Equal(*first) {
		t.Fatalf("published_at changed: %v -> %v", first, p)
	}
}

// T-5, R-AK-4: the owner cannot publish an event by hand either (outside the function the
// trigger refuses NULL -> value); an event with one mandatory delivery is published by its ack.
func TestPublishedAtOnlyThroughFunction(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-1", 1)
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	_, err := owner.Exec(ctx, `INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ($1::uuid, now())`, eventID)
	kernelfix.WantState(t, err, "OB202")
	// Even with the publication function's setting forged, an event whose delivery is open
	// cannot be published by hand.
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('pgoutbox.publishing', 'on', true)`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ($1::uuid, now())`, eventID)
	kernelfix.WantState(t, err, "OB202")
	_ = tx.Rollback(ctx)
	if p := dxPublishedAt(t, b.Admin, eventID); p != nil {
		t.Fatalf("published_at %v", p)
	}
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestMetering)
	if res := kernelfix.Ack(t, b.Disp, c); res != "complete" {
		t.Fatalf("ack %s", res)
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p == nil {
		t.Fatal("published_at NULL after the only mandatory ack")
	}
	// The setting is reset after the CAS.
	var setting string
	if err := b.Disp.QueryRow(ctx, `SELECT coalesce(current_setting('pgoutbox.publishing', true), '')`).Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "" {
		t.Fatalf("pgoutbox.publishing left as %q", setting)
	}
}

// T-5, R-AK-4: the last two mandatory acks of one event racing on two connections cannot both
// see the other delivery open: the publication function locks the event row first, so the
// second waits (asserted through pg_stat_activity), then sees the first ack and publishes.
func TestPublishedAtConcurrentLastAcks(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "case-1", 1)
	w1 := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	w2 := testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	ops := kernelfix.ClaimOne(t, w1, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps)
	coord := kernelfix.ClaimOne(t, w2, kernelfix.WorkerB, time.Minute, kernelfix.DestCoord)

	tx1, err := w1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	ack1, rc1 := kernelfix.ValidAck(t, ops)
	res1, err := pgcall.AckDelivery(ctx, tx1, kernelfix.FenceOf(ops), ack1, rc1)
	if err != nil || res1 != "not_complete" {
		t.Fatalf("first ack: %q %v", res1, err)
	}
	var pid2 int
	if err := w2.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	ack2, rc2 := kernelfix.ValidAck(t, coord)
	type result struct {
		res string
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := pgcall.AckDelivery(ctx, w2, kernelfix.FenceOf(coord), ack2, rc2)
		done <- result{r, err}
	}()
	dxWaitBlocked(t, b.Admin, pid2)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := <-done
	if r2.err != nil || r2.res != "complete" {
		t.Fatalf("second ack: %q %v", r2.res, r2.err)
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p == nil {
		t.Fatal("published_at NULL after both mandatory acks")
	}
}

// R-AK-4: the publication function raises (invalid, OB002) when an acknowledged delivery's ack
// fields disagree with the event; the ack that triggered it rolls back. The inconsistency is
// planted with triggers disabled (session_replication_role = replica, superuser only): no
// kernel path can produce it.
func TestPublishInvalidWhenAckInconsistent(t *testing.T) {
	t.Parallel()
	b := kernelfix.Setup(t)
	ctx := context.Background()
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Resolution, "case-1", 1)
	ops := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoreOps)
	coord := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, kernelfix.DestCoord)
	if res := kernelfix.Ack(t, b.Disp, ops); res != "not_complete" {
		t.Fatalf("first ack %s", res)
	}
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox.outbox_deliveries SET ack_event_envelope_sha256 = $3 WHERE event_id = $1::uuid AND destination = $2`,
		eventID, kernelfix.DestCoreOps, dxOtherSHA); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before := kernelfix.Row(t, b.Admin, coord.Destination, coord.EventID)
	ack, rc := kernelfix.ValidAck(t, coord)
	_, err = pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(coord), ack, rc)
	kernelfix.WantState(t, err, "OB002")
	if after := kernelfix.Row(t, b.Admin, coord.Destination, coord.EventID); after != before {
		t.Fatal("the rejected ack changed the delivery")
	}
	if p := dxPublishedAt(t, b.Admin, eventID); p != nil {
		t.Fatalf("published_at %v", p)
	}
}
