package kernel_test

// Kernel rules on a release of no domain (SPEC D-1): a kernel-only database, the synthetic release
// of kernelfix registered through the public functions only, receipts of its own kinds built by
// the receipt kit from the database's catalog. Fan-out, fencing, publication once every mandatory
// destination acknowledged (R-AK-4), per-aggregate ordering (R-CL-7) and the kernel-wide default
// retry policy for a destination without a row of its own (§2).

import (
	"context"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
)

func synClaim(t *testing.T, b kernelfix.SynBundle, dests ...string) []pgcall.ClaimedDelivery {
	t.Helper()
	return kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dests...)
}

func synPublished(t *testing.T, b kernelfix.SynBundle, eventID string) int {
	t.Helper()
	return kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.outbox_publications WHERE event_id = $1`, eventID)
}

func TestSyntheticReleaseFanOutFencingPublication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.SetupSynthetic(t)
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.delivery_destinations
	                                         WHERE destination NOT IN ('syn_plain', 'syn_ordered')`); n != 0 {
		t.Fatalf("a kernel-only database holds %d destinations besides the synthetic release's", n)
	}
	ev := b.Append(t, "agg-1", 1)
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.outbox_deliveries WHERE event_id = $1`, ev); n != 2 {
		t.Fatalf("deliveries of one synthetic event = %d, want 2 (one per member)", n)
	}
	claims := synClaim(t, b, kernelfix.SynPlain, kernelfix.SynOrdered)
	if len(claims) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(claims))
	}
	byDest := map[string]pgcall.ClaimedDelivery{}
	for _, c := range claims {
		byDest[c.Destination] = c
	}
	plain, ordered := byDest[kernelfix.SynPlain], byDest[kernelfix.SynOrdered]

	// A receipt of the other destination's kind is refused and changes nothing.
	wrong := b.Receipt(t, plain)
	if _, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(ordered), wrong.Ack, wrong.Receipt); err == nil {
		t.Fatal("an ack carrying another kind's receipt was accepted")
	}
	if got := kernelfix.Status(t, b.Admin, kernelfix.SynOrdered, ev); got != "leased" {
		t.Fatalf("after a refused ack the delivery is %q, want leased", got)
	}

	// A stale lease token is fenced off (OB001).
	doc := b.Receipt(t, plain)
	stale := kernelfix.FenceOf(plain)
	stale.LeaseToken = "00000000-0000-4000-8000-000000000000"
	_, err := pgcall.AckDelivery(ctx, b.Disp, stale, doc.Ack, doc.Receipt)
	kernelfix.WantFencing(t, err)

	// One of two mandatory acks: not published; both: published exactly once.
	res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(plain), doc.Ack, doc.Receipt)
	if err != nil || res != "not_complete" {
		t.Fatalf("first ack = %q, %v; want not_complete", res, err)
	}
	if n := synPublished(t, b, ev); n != 0 {
		t.Fatalf("published after one of two mandatory acks (%d rows)", n)
	}
	doc2 := b.Receipt(t, ordered)
	res, err = pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(ordered), doc2.Ack, doc2.Receipt)
	if err != nil || res != "complete" {
		t.Fatalf("second ack = %q, %v; want complete", res, err)
	}
	if n := synPublished(t, b, ev); n != 1 {
		t.Fatalf("publication rows = %d, want 1", n)
	}
	// The acknowledged delivery cannot be acknowledged again with its finished lease.
	_, err = pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(ordered), doc2.Ack, doc2.Receipt)
	kernelfix.WantFencing(t, err)
}

func TestSyntheticReleaseOrderingAndDefaultRetryPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.SetupSynthetic(t)
	first := b.Append(t, "agg-2", 1)
	second := b.Append(t, "agg-2", 2)

	// per_aggregate: only the head of agg-2 is claimable on syn_ordered.
	claims := synClaim(t, b, kernelfix.SynOrdered)
	if len(claims) != 1 || claims[0].EventID != first {
		t.Fatalf("per_aggregate claim returned %d rows (want only revision 1, %s): %+v", len(claims), first, claims)
	}
	// A retryable outcome puts it back to pending under the kernel-wide default policy: the
	// destination has no policy row of its own.
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.outbox_retry_policies WHERE destination = $1`, kernelfix.SynOrdered); n != 0 {
		t.Fatalf("syn_ordered has %d policy rows; the test needs none", n)
	}
	got, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(claims[0]), "consumer_unavailable", nil)
	if err != nil || got != "pending" {
		t.Fatalf("retry = %q, %v; want pending", got, err)
	}
	if outcome, _ := kernelfix.Finish(t, b.Admin, claims[0].AttemptID); outcome != "retryable" {
		t.Fatalf("attempt outcome = %q, want retryable", outcome)
	}
	// The default policy's first delay (base 1 s, jitter 20 %) keeps revision 1 unavailable for a
	// while; revision 2 stays blocked behind it whatever the clock.
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.outbox_deliveries
	        WHERE destination = $1 AND event_id = $2 AND available_at >= now() + interval '0.5 seconds'`,
		kernelfix.SynOrdered, first); n != 1 {
		t.Fatal("revision 1 was not delayed by the default retry policy")
	}
	for _, c := range synClaim(t, b, kernelfix.SynOrdered) {
		if c.EventID == second {
			t.Fatal("revision 2 was claimed while revision 1 is still open (R-CL-7)")
		}
	}
	// syn_plain (ordering none) hands out both revisions at once.
	if plain := synClaim(t, b, kernelfix.SynPlain); len(plain) != 2 {
		t.Fatalf("syn_plain claimed %d deliveries, want both revisions", len(plain))
	}
}
