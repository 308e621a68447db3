package tests

import (
	"context"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
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
	b := dxSetup(t)
	ctx := context.Background()
	eventID := dxAppend(t, b.admin, dxResolution, "case-1", 1)
	if n := dxInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid AND mandatory`, eventID); n != 2 {
		t.Fatalf("%d mandatory deliveries, want 2", n)
	}

	ops := dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestCoreOps)
	coord := dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestCoord)
	if ops.EventID != eventID || coord.EventID != eventID {
		t.Fatalf("claimed %s / %s", ops.EventID, coord.EventID)
	}
	// A retry of one delivery keeps the event unpublished.
	if _, err := pgcall.RetryDelivery(ctx, b.disp, fenceOf(coord), "consumer_unavailable", nil); err != nil {
		t.Fatal(err)
	}
	if res := dxAck(t, b.disp, ops); res != "not_complete" {
		t.Fatalf("first ack: %s, want not_complete", res)
	}
	if p := dxPublishedAt(t, b.admin, eventID); p != nil {
		t.Fatalf("published_at %v with a mandatory delivery open", p)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE event_id = $1::uuid AND destination = $2`,
		eventID, dxDestCoord); err != nil {
		t.Fatal(err)
	}
	coord = dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestCoord)
	if res := dxAck(t, b.disp, coord); res != "complete" {
		t.Fatalf("last ack: %s, want complete", res)
	}
	first := dxPublishedAt(t, b.admin, eventID)
	if first == nil {
		t.Fatal("published_at NULL after the last mandatory ack")
	}
	var delivered time.Time
	if err := b.admin.QueryRow(ctx, `SELECT max(delivered_at) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, eventID).Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	if first.Before(delivered) {
		t.Fatalf("published_at %v before the last delivered_at %v", first, delivered)
	}

	// The dispatcher has no privilege on publications at all.
	_, err := b.disp.Exec(ctx, `UPDATE outbox.outbox_publications SET published_at = now() WHERE event_id = $1::uuid`, eventID)
	dxWantState(t, err, "42501")
	// The owner is stopped by the trigger: re-timing, deleting (back to unpublished), a second
	// row, truncating, and forging the setting does not help once published (SPEC §2).
	owner := testdb.Conn(t, b.dsn, "outbox_owner")
	for _, stmt := range []string{
		`UPDATE outbox.outbox_publications SET published_at = now() + interval '1 second' WHERE event_id = $1::uuid`,
		`DELETE FROM outbox.outbox_publications WHERE event_id = $1::uuid`,
	} {
		_, err := owner.Exec(ctx, stmt, eventID)
		dxWantState(t, err, "OB202")
	}
	_, err = owner.Exec(ctx, `TRUNCATE outbox.outbox_publications`)
	dxWantState(t, err, "OB202")
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('pgoutbox.publishing', 'on', true)`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `UPDATE outbox.outbox_publications SET published_at = now() WHERE event_id = $1::uuid`, eventID)
	dxWantState(t, err, "OB202")
	_ = tx.Rollback(ctx)
	if p := dxPublishedAt(t, b.admin, eventID); p == nil || !p.Equal(*first) {
		t.Fatalf("published_at changed: %v -> %v", first, p)
	}
}

// T-5, R-AK-4: the owner cannot publish an event by hand either (outside the function the
// trigger refuses NULL -> value); an event with one mandatory delivery is published by its ack.
func TestPublishedAtOnlyThroughFunction(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	ctx := context.Background()
	eventID := dxAppend(t, b.admin, dxMetering, "agg-1", 1)
	owner := testdb.Conn(t, b.dsn, "outbox_owner")
	_, err := owner.Exec(ctx, `INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ($1::uuid, now())`, eventID)
	dxWantState(t, err, "OB202")
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
	dxWantState(t, err, "OB202")
	_ = tx.Rollback(ctx)
	if p := dxPublishedAt(t, b.admin, eventID); p != nil {
		t.Fatalf("published_at %v", p)
	}
	c := dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestMetering)
	if res := dxAck(t, b.disp, c); res != "complete" {
		t.Fatalf("ack %s", res)
	}
	if p := dxPublishedAt(t, b.admin, eventID); p == nil {
		t.Fatal("published_at NULL after the only mandatory ack")
	}
	// The setting is reset after the CAS.
	var setting string
	if err := b.disp.QueryRow(ctx, `SELECT coalesce(current_setting('pgoutbox.publishing', true), '')`).Scan(&setting); err != nil {
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
	b := dxSetup(t)
	ctx := context.Background()
	eventID := dxAppend(t, b.admin, dxResolution, "case-1", 1)
	w1 := testdb.Conn(t, b.dsn, "outbox_dispatcher")
	w2 := testdb.Conn(t, b.dsn, "outbox_dispatcher")
	ops := dxClaimOne(t, w1, dxWorkerA, time.Minute, dxDestCoreOps)
	coord := dxClaimOne(t, w2, dxWorkerB, time.Minute, dxDestCoord)

	tx1, err := w1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	ack1, rc1 := validAck(t, ops)
	res1, err := pgcall.AckDelivery(ctx, tx1, fenceOf(ops), ack1, rc1)
	if err != nil || res1 != "not_complete" {
		t.Fatalf("first ack: %q %v", res1, err)
	}
	var pid2 int
	if err := w2.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	ack2, rc2 := validAck(t, coord)
	type result struct {
		res string
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := pgcall.AckDelivery(ctx, w2, fenceOf(coord), ack2, rc2)
		done <- result{r, err}
	}()
	dxWaitBlocked(t, b.admin, pid2)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := <-done
	if r2.err != nil || r2.res != "complete" {
		t.Fatalf("second ack: %q %v", r2.res, r2.err)
	}
	if p := dxPublishedAt(t, b.admin, eventID); p == nil {
		t.Fatal("published_at NULL after both mandatory acks")
	}
}

// R-AK-4: the publication function raises (invalid, OB002) when an acknowledged delivery's ack
// fields disagree with the event; the ack that triggered it rolls back. The inconsistency is
// planted with triggers disabled (session_replication_role = replica, superuser only): no
// kernel path can produce it.
func TestPublishInvalidWhenAckInconsistent(t *testing.T) {
	t.Parallel()
	b := dxSetup(t)
	ctx := context.Background()
	eventID := dxAppend(t, b.admin, dxResolution, "case-1", 1)
	ops := dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestCoreOps)
	coord := dxClaimOne(t, b.disp, dxWorkerA, time.Minute, dxDestCoord)
	if res := dxAck(t, b.disp, ops); res != "not_complete" {
		t.Fatalf("first ack %s", res)
	}
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox.outbox_deliveries SET ack_event_envelope_sha256 = $3 WHERE event_id = $1::uuid AND destination = $2`,
		eventID, dxDestCoreOps, dxOtherSHA); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before := dxRow(t, b.admin, coord.Destination, coord.EventID)
	ack, rc := validAck(t, coord)
	_, err = pgcall.AckDelivery(ctx, b.disp, fenceOf(coord), ack, rc)
	dxWantState(t, err, "OB002")
	if after := dxRow(t, b.admin, coord.Destination, coord.EventID); after != before {
		t.Fatal("the rejected ack changed the delivery")
	}
	if p := dxPublishedAt(t, b.admin, eventID); p != nil {
		t.Fatalf("published_at %v", p)
	}
}
