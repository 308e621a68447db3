package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
)

// toActivateBroker registers the broker destination with per-aggregate ordering and activates
// delivery set 2 (the reference release plus a mandatory broker member for the metering type)
// in one producer database.
func toActivateBroker(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = admin.Exec(ctx, "RESET ROLE") }()
	if _, err := admin.Exec(ctx, `SELECT outbox.register_destination($1, $2, 'broker_publication', 'BrokerPublicationReceipt', 1, false, 'per_aggregate')`,
		dpBrokerDest, dpBrokerConsumer); err != nil {
		t.Fatalf("register broker destination: %v", err)
	}
	raw, err := reference.Releases.ReadFile(reference.ReleasePath)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		t.Fatal(err)
	}
	members := append(def["members"].([]any), map[string]any{
		"eventType": dispatcherfix.MeteringType, "eventSchemaVersion": "1", "destination": dpBrokerDest, "consumerName": dpBrokerConsumer,
		"expectedReceiptType": "BrokerPublicationReceipt", "expectedReceiptSchemaVersion": 1,
		"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	key := func(m any) string {
		x := m.(map[string]any)
		return x["eventType"].(string) + "\x00" + x["eventSchemaVersion"].(string) + "\x00" + x["destination"].(string) + "\x00" + x["consumerName"].(string)
	}
	sort.Slice(members, func(i, j int) bool { return key(members[i]) < key(members[j]) })
	def["members"], def["memberCount"], def["deliverySetVersion"] = members, len(members), 2
	b, _ := json.Marshal(def)
	doc, err := release.WithDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, admin, doc, "two-owners-test")
	if err != nil {
		t.Fatalf("register set 2: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, admin, q); err != nil {
		t.Fatalf("activate set 2: %v", err)
	}
}

// R-DP-9, seed 000 (an outbox per producer database, no cross-database transaction): two
// producer databases (owners "owner-a" and "owner-b"), each with its own outbox and its own
// dispatcher, publish into ONE JetStream stream; a subscriber applies the stream into ONE
// consumer database. Both owners use the same aggregate ids, and each appends revisions 1..N of
// every aggregate in several transactions. Afterwards:
//   - the stream and the consumer database hold every event of both owners once;
//   - per owner, each aggregate's revisions arrive in order (per-aggregate ordering is a rule of
//     each producer database's claim; the two owners interleave freely);
//   - nothing spans two databases: each producer database holds only its own owner's events and
//     their acknowledgements, every attempt on it was made by its own dispatcher, and no
//     database has a prepared (two-phase) transaction.
func TestTwoOwnersIntoOneStream(t *testing.T) {
	t.Parallel()
	const aggregates, revisions = 5, 12
	ctx := context.Background()
	url := dpNATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dpStream, Subjects: []string{"outbox.events.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	owners := []string{"owner-a", "owner-b"}
	dbs := map[string]*dispatcherfix.DB{}
	for _, owner := range owners {
		db := dispatcherfix.Setup(t)
		toActivateBroker(t, db.Admin)
		dispatcherfix.FastRetry(t, db.Admin, dpBrokerDest, 100)
		dbs[owner] = db
		tr, err := transport.NewJetStream(transport.JetStreamOptions{URL: url, Subject: dpSubject, Stream: dpStream, Timeout: 5 * time.Second, Name: "dp-" + owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		cfg := dispatcherfix.Config("dp-"+owner, map[string]config.Destination{dpBrokerDest: {Transport: config.TransportJetStream,
			NATSURL: url, Subject: dpSubject, Stream: dpStream, Timeout: 5 * time.Second, Auth: config.AuthNone}})
		dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dpBrokerDest: tr})
	}
	// both owners append at once, revision by revision, each in its own database's transactions
	errs := make(chan error, len(owners))
	for _, owner := range owners {
		prod := testdb.Conn(t, dbs[owner].Dsn, "outbox_producer")
		go func(owner string, prod *pgx.Conn) {
			for rev := int64(1); rev <= revisions; rev++ {
				tx, err := prod.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				var evs []producer.Event
				for a := 0; a < aggregates; a++ {
					evs = append(evs, producer.Event{EventType: dispatcherfix.MeteringType, EventSchemaVersion: "1",
						AggregateID: fmt.Sprintf("agg-%d", a), AggregateRevision: rev,
						Tenant:        producer.Tenant{TenantKind: "organization", TenantID: owner, WorkspaceID: "workspace-1"},
						CorrelationID: "c", CausationID: "k", OperationID: fmt.Sprintf("op-%d-%d", a, rev)})
				}
				if _, err := producer.AppendMany(ctx, tx, evs); err != nil {
					errs <- err
					return
				}
				if err := tx.Commit(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(owner, prod)
	}
	for range owners {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := len(owners) * aggregates * revisions

	// the consumer database: the subscriber applies each message once, by event id, in stream order
	consumerDB := testdb.Conn(t, testdb.KernelURL(t), "")
	if _, err := consumerDB.Exec(ctx, `CREATE TABLE applied (seq bigint PRIMARY KEY, event_id uuid UNIQUE, owner text, aggregate_id text, revision bigint)`); err != nil {
		t.Fatal(err)
	}
	oc, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	deadline := time.Now().Add(3 * time.Minute)
	for applied < total {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d of %d applied", applied, total)
		}
		batch, err := oc.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				EventID           string `json:"eventId"`
				AggregateID       string `json:"aggregateId"`
				AggregateRevision int64  `json:"aggregateRevision"`
				Tenant            struct {
					TenantID string `json:"tenantId"`
				} `json:"tenant"`
			}
			if err := json.Unmarshal(m.Data(), &env); err != nil {
				t.Fatal(err)
			}
			tag, err := consumerDB.Exec(ctx, `INSERT INTO applied VALUES ($1, $2::uuid, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING`,
				md.Sequence.Stream, env.EventID, env.Tenant.TenantID, env.AggregateID, env.AggregateRevision)
			if err != nil {
				t.Fatal(err)
			}
			if tag.RowsAffected() != 1 {
				t.Fatalf("event %s (%s %s@%d) stored twice in the stream", env.EventID, env.Tenant.TenantID, env.AggregateID, env.AggregateRevision)
			}
			applied++
		}
	}
	// per owner and aggregate, revisions 1..N in stream order
	rows, err := consumerDB.Query(ctx, `SELECT owner, aggregate_id, array_agg(revision ORDER BY seq) FROM applied GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for rows.Next() {
		var owner, agg string
		var revs []int64
		if err := rows.Scan(&owner, &agg, &revs); err != nil {
			t.Fatal(err)
		}
		groups++
		for i, r := range revs {
			if r != int64(i+1) || len(revs) != revisions {
				t.Fatalf("%s %s: revisions in stream order %v, want 1..%d", owner, agg, revs, revisions)
			}
		}
	}
	if rows.Err() != nil || groups != len(owners)*aggregates {
		t.Fatalf("%d (owner, aggregate) groups (%v)", groups, rows.Err())
	}
	for _, owner := range owners {
		db := dbs[owner]
		dispatcherfix.Eventually(t, owner+" acknowledged", func() bool {
			return db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND status = 'acknowledged'`, dpBrokerDest) == aggregates*revisions
		})
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_events WHERE tenant_id <> $1`, owner); n != 0 {
			t.Fatalf("%s's database holds %d events of another owner", owner, n)
		}
		if n := db.Count(t, `SELECT count(*) FROM pg_prepared_xacts`); n != 0 {
			t.Fatalf("%d prepared transactions", n)
		}
		// every attempt on this database was made by this owner's dispatcher
		if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts WHERE worker <> $1`, "dp-"+owner); n != 0 {
			t.Fatalf("%d attempts on %s's database by another dispatcher", n, owner)
		}
	}
	var owned int
	if err := consumerDB.QueryRow(ctx, `SELECT count(DISTINCT owner) FROM applied`).Scan(&owned); err != nil || owned != 2 {
		t.Fatalf("owners in the consumer database: %d (%v)", owned, err)
	}
}
