package tests

import (
	"context"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// R-AK-5, R-CL-2, R-AK-8: a delivery whose lease expires on its last allowed attempt (its
// dispatcher dies or stalls every time) is quarantined by recovery with reason retry_exhausted
// and the event's digest, its open attempt finished lease_expired_unknown/quarantined — never
// reclaimed forever, never a silent success — and it is not claimed again. Earlier expiries
// stay reclaimable.
func TestRecoveryQuarantinesAtMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dxSetup(t)
	dpFastRetry(t, b.admin, dxDestMetering, 2)
	eventID := dxAppend(t, b.admin, dxMetering, "poison-1", 1)

	first := dxClaimOne(t, b.disp, dxWorkerA, time.Second, dxDestMetering)
	dxSleepPast(t, b.disp, first.LeaseExpiresAt)
	// Attempt 1 of 2 expired: the claim's own recovery makes it reclaimable.
	second := dxClaimOne(t, b.disp, dxWorkerB, time.Second, dxDestMetering)
	if second.EventID != eventID || second.AttemptNumber != 2 {
		t.Fatalf("reclaim %+v", second)
	}
	if o, d := dxFinish(t, b.admin, first.AttemptID); o != "lease_expired_unknown" || d != "reclaimable" {
		t.Fatalf("attempt 1 finish %s/%s", o, d)
	}
	dxSleepPast(t, b.disp, second.LeaseExpiresAt)
	n, err := pgcall.RecoverExpiredLeases(ctx, b.disp, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("recovered %d attempts, want 1", n)
	}
	if o, d := dxFinish(t, b.admin, second.AttemptID); o != "lease_expired_unknown" || d != "quarantined" {
		t.Fatalf("attempt 2 finish %s/%s, want lease_expired_unknown/quarantined", o, d)
	}
	if s := dxStatus(t, b.admin, dxDestMetering, eventID); s != "quarantined" {
		t.Fatalf("status %s, want quarantined", s)
	}
	if q := dxInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_quarantine q JOIN outbox.outbox_events e USING (event_id)
		WHERE q.event_id = $1 AND q.reason = 'retry_exhausted' AND q.attempt_id = $2
		  AND q.event_envelope_sha256 = e.event_envelope_sha256`, eventID, second.AttemptID); q != 1 {
		t.Fatalf("%d quarantine rows with reason retry_exhausted and the event digest", q)
	}
	if cs := dxClaim(t, b.disp, dxWorkerA, 10, time.Minute, dxDestMetering); len(cs) != 0 {
		t.Fatalf("a quarantined delivery was claimed again: %+v", cs)
	}
	if p := dxInt(t, b.admin, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1`, eventID); p != 0 {
		t.Fatal("an exhausted delivery's event was published")
	}
}
