//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const benchOrderedDest = "ordered_metering"

// benchOrdered registers a per_aggregate destination and activates delivery set 2 (the reference
// release plus a member sending execution.attempt-eligibility.finalized@1 to it).
func benchOrdered(b *testing.B, admin *pgx.Conn) {
	b.Helper()
	ctx := context.Background()
	if _, err := admin.Exec(ctx, `SELECT outbox.register_destination($1, 'ordered_metering_consumer', 'metering_input_processor',
		'MeteringInputProcessorConsumerReceipt', 1, false, 'per_aggregate')`, benchOrderedDest); err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(testfix.ReferenceRelease(b), &m); err != nil {
		b.Fatal(err)
	}
	delete(m, "deliverySetDefinitionDigest")
	m["deliverySetVersion"] = 2
	ms := append(m["members"].([]any), map[string]any{
		"eventType": "execution.attempt-eligibility.finalized@1", "eventSchemaVersion": "1", "destination": benchOrderedDest,
		"consumerName": "ordered_metering_consumer", "expectedReceiptType": "MeteringInputProcessorConsumerReceipt",
		"expectedReceiptSchemaVersion": 1, "projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	key := func(x any) string {
		mm := x.(map[string]any)
		return mm["eventType"].(string) + "\x00" + mm["eventSchemaVersion"].(string) + "\x00" + mm["destination"].(string) + "\x00" + mm["consumerName"].(string)
	}
	sort.Slice(ms, func(i, j int) bool { return key(ms[i]) < key(ms[j]) })
	m["members"], m["memberCount"] = ms, len(ms)
	d, err := canon.Digest(m)
	if err != nil {
		b.Fatal(err)
	}
	m["deliverySetDefinitionDigest"] = d
	doc, _ := json.Marshal(m)
	q, err := pgcall.RegisterDeliverySet(ctx, admin, doc, "bench-ordered")
	if err != nil {
		b.Fatal(err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, admin, q); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimBlockedChains (R-CL-6, R-SEC-5 finding 5): a per_aggregate destination where
// revision 1 of one aggregate is leased and revisions 2..N pending; an empty claim of that
// destination, and a claim of 100 by a dispatcher serving it and metering_input_processor (which
// holds the same N events, all due), at N = 2,000 and 16,000. Both must stay flat in N.
func BenchmarkClaimBlockedChains(b *testing.B) {
	ctx := context.Background()
	type side struct {
		name        string
		n           int
		disp        *pgx.Conn
		empty, both time.Duration
	}
	sides := []*side{{name: "chain_2000", n: 2000}, {name: "chain_16000", n: 16000}}
	for _, s := range sides {
		dsn := testdb.URL(b)
		admin := testdb.Conn(b, dsn, "")
		testfix.ActivateReference(b, admin)
		benchOrdered(b, admin)
		prod := testdb.Conn(b, dsn, "outbox_producer")
		for done := 0; done < s.n; done += 1000 {
			envs := make([]map[string]any, 0, 1000)
			for i := done; i < min(done+1000, s.n); i++ {
				envs = append(envs, testfix.Envelope("execution.attempt-eligibility.finalized@1", "1", "chain-agg", int64(i+1)))
			}
			raw, _ := json.Marshal(envs)
			if _, err := pgcall.AppendEvents(ctx, prod, pgcall.AppendEventsParams{Events: raw}); err != nil {
				b.Fatal(err)
			}
		}
		s.disp = testdb.Conn(b, dsn, "outbox_dispatcher")
		if cs, err := pgcall.ClaimDeliveries(ctx, s.disp, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchOrderedDest}, BatchSize: 10, Lease: time.Hour}); err != nil || len(cs) != 1 {
			b.Fatalf("%s: leasing revision 1: %d rows, %v", s.name, len(cs), err)
		}
		if _, err := admin.Exec(ctx, `VACUUM ANALYZE outbox.outbox_deliveries`); err != nil {
			b.Fatal(err)
		}
	}
	claim := func(s *side, dests []string, want int) time.Duration {
		tx, err := s.disp.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		t0 := time.Now()
		cs, err := pgcall.ClaimDeliveries(ctx, tx, pgcall.ClaimParams{Worker: "bench", Destinations: dests, BatchSize: 100, Lease: time.Minute})
		d := time.Since(t0)
		if err != nil || len(cs) != want {
			b.Fatalf("%s claim %v: %d rows (want %d), %v", s.name, dests, len(cs), want, err)
		}
		return d
	}
	both := []string{benchOrderedDest, benchDest}
	for i := 0; i < 10; i++ {
		for _, s := range sides {
			claim(s, []string{benchOrderedDest}, 0)
			claim(s, both, 100)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			s.empty += claim(s, []string{benchOrderedDest}, 0)
			s.both += claim(s, both, 100)
		}
	}
	b.StopTimer()
	for _, s := range sides {
		b.ReportMetric(float64(s.empty)/float64(b.N)/1e3, fmt.Sprintf("%s_empty_µs/claim", s.name))
		b.ReportMetric(float64(s.both)/float64(b.N)/1e3, fmt.Sprintf("%s_two_dests_µs/claim", s.name))
	}
}
