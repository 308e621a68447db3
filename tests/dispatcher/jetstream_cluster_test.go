package dispatcher

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
	"github.com/oceanway/pgoutbox/transport"
)

// jsCluster is a 3-node JetStream cluster of embedded nats-server nodes on loopback, each with
// its own store directory, which a node keeps across a kill and a restart.
type jsCluster struct {
	t       *testing.T
	mu      sync.Mutex
	names   []string
	client  []int
	route   []int
	store   []string
	servers []*server.Server
}

func jsFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newJSCluster(t *testing.T, n int) *jsCluster {
	t.Helper()
	c := &jsCluster{t: t, servers: make([]*server.Server, n)}
	for i := 0; i < n; i++ {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
		c.client = append(c.client, jsFreePort(t))
		c.route = append(c.route, jsFreePort(t))
		c.store = append(c.store, t.TempDir())
	}
	for i := 0; i < n; i++ {
		c.start(i)
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.servers {
			if s != nil {
				s.Shutdown()
				s.WaitForShutdown()
			}
		}
	})
	return c
}

func (c *jsCluster) start(i int) {
	c.t.Helper()
	var routes []*url.URL
	for j := range c.names {
		if j != i {
			routes = append(routes, &url.URL{Scheme: "nats", Host: "127.0.0.1:" + strconv.Itoa(c.route[j])})
		}
	}
	s, err := server.NewServer(&server.Options{
		ServerName: c.names[i], Host: "127.0.0.1", Port: c.client[i],
		JetStream: true, StoreDir: c.store[i], NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "pgoutbox-test", Host: "127.0.0.1", Port: c.route[i]},
		Routes:  routes,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		c.t.Fatalf("nats-server %s not ready", c.names[i])
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
}

// kill shuts node i down (its store stays on disk).
func (c *jsCluster) kill(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	s.Shutdown()
	s.WaitForShutdown()
}

func (c *jsCluster) index(name string) int {
	for i, n := range c.names {
		if n == name {
			return i
		}
	}
	c.t.Fatalf("no node %q", name)
	return -1
}

// urls is every node's client URL, comma-separated (what a client or the dispatcher's nats_url
// takes for a cluster).
func (c *jsCluster) urls() string {
	var u []string
	for _, p := range c.client {
		u = append(u, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	return strings.Join(u, ",")
}

// R-DP-9, R-AK-1, D-7: JetStream as the scale-out engine. A 3-node JetStream cluster (embedded
// nats-server nodes, stream replicas 3) receives a few thousand deliveries from the dispatcher
// while the stream's leader node is killed mid-run and later restarted. Afterwards:
//   - every broker delivery is acknowledged and none quarantined;
//   - the stream holds every event exactly once (Nats-Msg-Id = event id de-duplicates the
//     re-publications of attempts whose PubAck was lost in the fail-over);
//   - nothing was acknowledged that the stream lost: each acknowledged delivery's receipt ref
//     <stream>:<sequence> names a stored message whose Nats-Msg-Id is that delivery's event;
//   - the receipts are the delivery machinery's unchanged broker_publication receipts: the
//     database's own canonicalizer reproduces every stored receipt digest (verify_ack_digests);
//   - the restarted node caught up (every replica current).
//
// Bounded: the run has a deadline (dispatcherfix.Eventually-style loops with explicit limits).
func TestJetStreamClusterNodeKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node JetStream cluster: not in -short")
	}
	t.Parallel()
	const events = 2000
	ctx := context.Background()
	db := dispatcherfix.Setup(t)
	dpActivateWithBroker(t, db)
	// fail-over errors are retried quickly and never exhaust the policy
	dispatcherfix.FastRetry(t, db.Admin, dpBrokerDest, 1000)
	cl := newJSCluster(t, 3)

	nc, err := nats.Connect(cl.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var stream jetstream.Stream
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		stream, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: dpStream, Subjects: []string{"outbox.events.>"},
			Replicas: 3, Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create R3 stream: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// a few thousand events, appended before the run by the producer library
	prod := testdb.Conn(t, db.Dsn, "outbox_producer")
	var ids []string
	for len(ids) < events {
		batch := make([]producer.Event, 0, 500)
		for i := 0; i < 500 && len(ids)+len(batch) < events; i++ {
			n := len(ids) + len(batch)
			batch = append(batch, producer.Event{EventType: dispatcherfix.MeteringType, EventSchemaVersion: "1",
				AggregateID: fmt.Sprintf("agg-%d", n), AggregateRevision: 1,
				Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "tenant-1", WorkspaceID: "workspace-1"},
				CorrelationID: fmt.Sprintf("corr-%d", n), CausationID: fmt.Sprintf("cause-%d", n), OperationID: fmt.Sprintf("op-%d", n)})
		}
		rs, err := producer.AppendMany(ctx, prod, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ids = append(ids, r.EventID)
		}
	}

	tr, err := transport.NewJetStream(transport.JetStreamOptions{URL: cl.urls(), Subject: dpSubject, Stream: dpStream,
		Timeout: 2 * time.Second, Name: "dp-js-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	cfg := dispatcherfix.Config("dp-js-cluster", map[string]config.Destination{dpBrokerDest: {Transport: config.TransportJetStream,
		NATSURL: cl.urls(), Subject: dpSubject, Stream: dpStream, Timeout: 2 * time.Second, Auth: config.AuthNone}})
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dpBrokerDest: tr})

	acked := func() int {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND status = 'acknowledged'`, dpBrokerDest)
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		end := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("timed out after %s waiting for %s (%d of %d acknowledged)", limit, what, acked(), events)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// kill the stream's leader once a quarter is acknowledged, restart it at three quarters
	waitFor("a quarter acknowledged", 3*time.Minute, func() bool { return acked() >= events/4 })
	info, err := stream.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("stream leader: %+v %v", info, err)
	}
	victim := cl.index(info.Cluster.Leader)
	cl.kill(victim)
	atKill := acked()
	t.Logf("killed stream leader %s at %d acknowledged", cl.names[victim], atKill)
	waitFor("progress with a node down", 3*time.Minute, func() bool { return acked() >= 3*events/4 && acked() > atKill })
	cl.start(victim)
	t.Logf("restarted %s at %d acknowledged", cl.names[victim], acked())
	waitFor("every delivery acknowledged", 4*time.Minute, func() bool { return acked() == events })

	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND status <> 'acknowledged'`, dpBrokerDest); n != 0 {
		t.Fatalf("%d broker deliveries not acknowledged", n)
	}
	// the restarted node caught up: every replica current
	waitFor("all replicas current", 2*time.Minute, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		in, err := stream.Info(cctx)
		if err != nil || in.Cluster == nil || in.Cluster.Leader == "" || len(in.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range in.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return in.State.Msgs == events
	})

	// every stored message: its sequence and Nats-Msg-Id, each event exactly once
	bySeq := make(map[uint64]string, events)
	seen := make(map[string]uint64, events)
	oc, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for len(bySeq) < events {
		batch, err := oc.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if first, dup := seen[id]; dup {
				t.Fatalf("event %s stored twice (sequences %d and %d)", id, first, md.Sequence.Stream)
			}
			seen[id], bySeq[md.Sequence.Stream] = md.Sequence.Stream, id
		}
		if batch.Error() != nil && got == 0 {
			t.Fatalf("read stream: %v (%d of %d read)", batch.Error(), len(bySeq), events)
		}
		if got == 0 {
			t.Fatalf("stream ended after %d of %d messages", len(bySeq), events)
		}
	}
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			t.Fatalf("event %s acknowledged but not in the stream", id)
		}
	}
	// each acknowledged delivery's receipt names a stored message of its own event
	rows, err := db.Admin.Query(ctx, `SELECT event_id::text, ack_receipt_kind, ack_receipt_ref FROM outbox.outbox_deliveries WHERE destination = $1`, dpBrokerDest)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for rows.Next() {
		var id, kind, ref string
		if err := rows.Scan(&id, &kind, &ref); err != nil {
			t.Fatal(err)
		}
		seq, err := strconv.ParseUint(strings.TrimPrefix(ref, dpStream+":"), 10, 64)
		if kind != "broker_publication" || err != nil || bySeq[seq] != id {
			t.Fatalf("delivery of %s: receipt %s %s names message %q", id, kind, ref, bySeq[seq])
		}
		checked++
	}
	if rows.Err() != nil || checked != events {
		t.Fatalf("checked %d receipts (%v)", checked, rows.Err())
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.verify_ack_digests(100000)`); n != 0 {
		t.Fatalf("%d acknowledged receipts whose digest the database does not reproduce", n)
	}
	retried := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes f
		JOIN outbox.outbox_delivery_attempt_starts s ON s.attempt_id = f.attempt_id WHERE s.destination = $1 AND f.outcome <> 'acknowledged'`, dpBrokerDest)
	t.Logf("%d events, each stored once; %d attempts failed during the fail-over and were retried", events, retried)
}
