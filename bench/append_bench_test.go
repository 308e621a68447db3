//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// payload1K is a ~1 KiB business payload of strings and integers (no floats: SPEC D-2).
func payload1K(i int) json.RawMessage {
	items := make([]string, 0, 12)
	for k := 0; k < 12; k++ {
		items = append(items, fmt.Sprintf(`{"sku":"sku-%05d","quantity":%d,"unitPrice":"%d.%02d","note":"%s"}`, k, k+1, 10+k, k, strings.Repeat("n", 20)))
	}
	return json.RawMessage(fmt.Sprintf(`{"orderId":"order-%d","customer":"customer-%d","items":[%s]}`, i, i%97, strings.Join(items, ",")))
}

func benchEvent(eventType, schema string, i int) producer.Event {
	return producer.Event{
		EventType: eventType, EventSchemaVersion: schema,
		AggregateID: fmt.Sprintf("agg-%d", i), AggregateRevision: 1,
		Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "t-1", WorkspaceID: "w-1"},
		CorrelationID: fmt.Sprintf("c-%d", i), OperationID: fmt.Sprintf("o-%d", i), CausationID: fmt.Sprintf("k-%d", i),
		Payload: payload1K(i),
	}
}

// BenchmarkAppend compares, in one run and on one connection with one commit per operation
// (synchronous_commit on, fsync on), a plain INSERT of the same envelope into an unconstrained
// table with append_event on the database-canonicalization path and on the Go hot path
// (SPEC D-2), for pairs with one and two destinations. Reported: µs per committed append and the
// ratio to the plain insert of the same run.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	if _, err := admin.Exec(ctx, `CREATE TABLE public.bench_plain (event_id uuid PRIMARY KEY, envelope jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `GRANT INSERT ON public.bench_plain TO outbox_producer`); err != nil {
		b.Fatal(err)
	}
	conn := testdb.Conn(b, dsn, "outbox_producer")
	type variant struct {
		name string
		run  func(i int) error
	}
	one, two := "execution.run-finalization.closed@1", "billing.finalization-reconciliation-resolution.applied@1"
	variants := []variant{
		{"plain_insert", func(i int) error {
			doc, id, err := producer.Envelope(benchEvent(one, "1", i))
			if err != nil {
				return err
			}
			_, err = conn.Exec(ctx, `INSERT INTO public.bench_plain VALUES ($1::uuid, $2::jsonb)`, id, string(doc))
			return err
		}},
		{"hot_path_1_destination", func(i int) error { _, err := producer.Append(ctx, conn, benchEvent(one, "1", i)); return err }},
		{"hot_path_2_destinations", func(i int) error { _, err := producer.Append(ctx, conn, benchEvent(two, "1", i)); return err }},
		{"db_canonicalize_1_destination", func(i int) error { return dbAppend(ctx, conn, benchEvent(one, "1", i)) }},
		{"db_canonicalize_2_destinations", func(i int) error { return dbAppend(ctx, conn, benchEvent(two, "1", i)) }},
	}
	// Warm up every path (plans, caches) before measuring.
	for _, v := range variants {
		for i := 0; i < 20; i++ {
			if err := v.run(-1 - i); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
	}
	spent := make([]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, v := range variants { // interleaved, so drift affects all variants alike
			start := time.Now()
			if err := v.run(i*len(variants) + k); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			spent[k] += time.Since(start)
		}
	}
	b.StopTimer()
	base := float64(spent[0]) / float64(b.N)
	for k, v := range variants {
		per := float64(spent[k]) / float64(b.N)
		b.ReportMetric(per/1e3, v.name+"_µs/op")
		if k > 0 {
			b.ReportMetric(per/base, v.name+"_ratio")
		}
	}
}

func dbAppend(ctx context.Context, conn *pgx.Conn, ev producer.Event) error {
	doc, _, err := producer.Envelope(ev)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `SELECT outbox.append_event($1::json)`, string(doc))
	return err
}
