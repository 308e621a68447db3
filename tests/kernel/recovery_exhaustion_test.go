package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
)

// R-AK-5, R-CL-2, R-AK-8: a delivery whose lease expires on its last allowed attempt (its
// dispatcher dies or stalls every time) is quarantined by recovery with reason retry_exhausted
// and the event's digest, its open attempt finished lease_expired_unknown/quarantined — never
// reclaimed forever, never a silent success — and it is not claimed again. Earlier expiries
// stay reclaimable.
func TestRecoveryQuarantinesAtMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	dispatcherfix.FastRetry(t, b.Admin, kernelfix.DestMetering, 2)
	eventID := kernelfix.Append(t, b.Admin, kernelfix.Metering, "poison-1", 1)

	first := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Second, kernelfix.DestMetering)
	dxSleepPast(t, b.Disp, first.LeaseExpiresAt)
	// Attempt 1 of 2 expired: the claim's own recovery makes it reclaimable.
	second := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerB, time.Second, kernelfix.DestMetering)
	if second.EventID != eventID || second.AttemptNumber != 2 {
		t.Fatalf("reclaim %+v", second)
	}
	if o, d := kernelfix.Finish(t, b.Admin, first.AttemptID); o != "lease_expired_unknown" || d != "reclaimable" {
		t.Fatalf("attempt 1 finish %s/%s", o, d)
	}
	dxSleepPast(t, b.Disp, second.LeaseExpiresAt)
	n, err := pgcall.RecoverExpiredLeases(ctx, b.Disp, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("recovered %d attempts, want 1", n)
	}
	if o, d := kernelfix.Finish(t, b.Admin, second.AttemptID); o != "lease_expired_unknown" || d != "quarantined" {
		t.Fatalf("attempt 2 finish %s/%s, want lease_expired_unknown/quarantined", o, d)
	}
	if s := kernelfix.Status(t, b.Admin, kernelfix.DestMetering, eventID); s != "quarantined" {
		t.Fatalf("status %s, want quarantined", s)
	}
	if q := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_quarantine q JOIN outbox.outbox_events e USING (event_id)
		WHERE q.event_id = $1 AND q.reason = 'retry_exhausted' AND q.attempt_id = $2
		  AND q.event_envelope_sha256 = e.event_envelope_sha256`, eventID, second.AttemptID); q != 1 {
		t.Fatalf("%d quarantine rows with reason retry_exhausted and the event digest", q)
	}
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, time.Minute, kernelfix.DestMetering); len(cs) != 0 {
		t.Fatalf("a quarantined delivery was claimed again: %+v", cs)
	}
	if p := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_publications WHERE event_id = $1`, eventID); p != 0 {
		t.Fatal("an exhausted delivery's event was published")
	}
}
