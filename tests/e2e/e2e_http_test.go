package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/transport"
)

// R-CO-6, R-DP-1, R-DP-2, R-AK-4, R-AK-8, T-8 (small): the reference scenario end to end over
// loopback HTTP with HMAC — a dispatcher and the four reference consumers, each with its own
// database. Every mandatory delivery ends terminal (only the deliberately rejected event is
// quarantined), every fully acknowledged event has published_at, and every effect is counted
// exactly once at the consumers.
func TestEndToEndHTTPReferenceScenario(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dispatcherfix.Setup(t)
	const secret = "e2e-shared-secret-not-for-production"
	mux := http.NewServeMux()
	consumerDB := map[string]string{}
	for _, spec := range reference.All() {
		dsn := testdb.URL(t) // the consumer's own database, migrated like any pgoutbox database
		consumerDB[spec.ConsumerName] = dsn
		admin := testdb.Conn(t, dsn, "")
		if err := spec.Install(ctx, admin, "outbox_consumer"); err != nil {
			t.Fatal(err)
		}
		kit, err := spec.New(context.Background(), testdb.Pool(t, dsn), func(c *consumer.Config) {
			c.Role = "outbox_consumer"
			c.HMACSecret = []byte(secret)
		})
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/consumers/"+spec.ConsumerName, kit)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	dests := map[string]config.Destination{}
	trs := map[string]transport.Transport{}
	for _, spec := range reference.All() {
		d := config.Destination{Transport: config.TransportHTTP, URL: srv.URL + "/consumers/" + spec.ConsumerName,
			Timeout: 10 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret([]byte(secret)),
			SecretEnv: "X", MaxResponseBytes: 1 << 20}
		dests[spec.Destination] = d
		h, err := transport.NewHTTP(transport.HTTPOptions{URL: d.URL, Timeout: d.Timeout, Auth: config.AuthHMAC, Secret: d.Secret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		trs[spec.Destination] = h
	}
	// Gaps (out-of-order revisions) are retried quickly in this test.
	for _, spec := range reference.All() {
		dispatcherfix.FastRetry(t, db.Admin, spec.Destination, 50)
	}
	dispatcherfix.Start(t, db, dispatcherfix.Config("e2e-worker", dests), trs)

	producerConn := testdb.Conn(t, db.Dsn, "outbox_producer")
	const runs = 6
	n, err := scenario.Produce(ctx, producerConn, runs)
	if err != nil {
		t.Fatal(err)
	}
	if n != runs*scenario.EventsPerRun+1 {
		t.Fatalf("produced %d events", n)
	}
	auditor := testdb.Conn(t, db.Dsn, "outbox_auditor")
	var s pgcall.PublicationSummary
	dispatcherfix.Eventually(t, "every delivery terminal", func() bool {
		s, err = pgcall.ReadPublicationSummary(ctx, auditor)
		return err == nil && s.NonTerminal == 0
	})
	if s.Events != int64(n) || s.OpenAttempts != 0 {
		t.Fatalf("summary %+v", s)
	}
	if s.Published != s.FullyAcked || s.Published != int64(n-1) {
		t.Fatalf("published %d, fully acknowledged %d, want both %d", s.Published, s.FullyAcked, n-1)
	}
	q, err := pgcall.QuarantinedDeliveries(ctx, auditor, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Reason != "consumer_rejected" || q[0].Destination != "core_operations" {
		t.Fatalf("quarantine %+v, want only the rejected run.created", q)
	}
	wantApplied := map[string]int64{
		reference.OperationsProjector: runs * 9, reference.MeteringInputProcessorConsumer: runs * 2,
		reference.BillingFinalizationCoordinatorConsumer: runs * 2, reference.BillingSettlementCatchUpConsumer: runs,
	}
	for _, spec := range reference.All() {
		applied, dup, err := spec.Effects(ctx, testdb.Conn(t, consumerDB[spec.ConsumerName], ""))
		if err != nil {
			t.Fatal(err)
		}
		if applied != wantApplied[spec.ConsumerName] || dup != 0 {
			t.Errorf("%s applied %d (want %d), duplicated %d", spec.ConsumerName, applied, wantApplied[spec.ConsumerName], dup)
		}
	}
}
