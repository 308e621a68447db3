// Package consumerfix is shared by tests/consumer and the test rooms that run reference consumers
// (projection, readmodel, kernel, dispatcher). Shared setup of the consumer-kit and inbox tests
// (SPEC §6): a fresh migrated database per test with the four reference domain schemas installed
// and granted to a consumer role, kits over it that run every transaction as that role (so the
// inbox grants are exercised), and deliveries built the way a dispatcher builds them.
package consumerfix

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// Role is the role the reference consumers' transactions run as in tests: a member of
// outbox_consumer (inbox functions) granted the reference domain schemas, like a production
// consumer login role.
const Role = "pgoutbox_test_refconsumer"

var ckRoleOnce sync.Once

// Bundle is one test database with the reference domain schemas installed, and a superuser pool on it.
type Bundle struct {
	Dsn  string
	Pool *pgxpool.Pool
}

// Setup creates a fresh migrated database with the four reference domain schemas installed and
// granted to Role.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.URL(t)
	pool := testdb.Pool(t, dsn)
	ckRoleOnce.Do(func() {
		// Roles are cluster-wide: tolerate a parallel package creating it at the same moment.
		_, err := pool.Exec(ctx, `DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+Role+`') THEN
				CREATE ROLE `+Role+` NOLOGIN IN ROLE outbox_consumer;
			END IF;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
		if err != nil {
			t.Fatalf("create role: %v", err)
		}
	})
	for _, s := range reference.All() {
		if err := s.Install(ctx, pool, Role); err != nil {
			t.Fatal(err)
		}
		// R-PV-1: the projection versions the reference consumers build are registered (in a
		// deployment, activating the delivery set that targets them does it).
		if s.ProjectionName != "" {
			RegisterProjectionVersion(t, pool, s.ProjectionName, s.ProjectionVersion)
		}
	}
	return &Bundle{Dsn: dsn, Pool: pool}
}

// Spec is the reference consumer spec named name; the test fails when there is none.
func Spec(t *testing.T, name string) reference.Spec {
	t.Helper()
	s, ok := reference.Lookup(name)
	if !ok {
		t.Fatalf("no reference consumer %s", name)
	}
	return s
}

// Kit returns the reference consumer name over the bundle's database in its Apply form
// (reference.Spec.ApplyConfig: tests wrap Apply); edit may adjust its config. MutateKit is the
// default one-round-trip form of the recorders.
func (b *Bundle) Kit(t *testing.T, name string, edit func(*consumer.Config)) *consumer.Consumer {
	t.Helper()
	cfg := Spec(t, name).ApplyConfig(b.Pool)
	cfg.Role = Role
	if edit != nil {
		edit(&cfg)
	}
	c, err := consumer.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("consumer.New: %v", err)
	}
	return c
}

// Delivery is what a dispatcher hands to the consumer of spec for env: canonical bytes and
// their digest, the frozen receipt contract and projection target.
func Delivery(t testing.TB, spec reference.Spec, env map[string]any) wire.Delivery {
	t.Helper()
	raw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := canon.SHA256Hex(c)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := testdb.Receipts(t).Lookup(spec.Kind)
	return wire.Delivery{
		Destination: spec.Destination, ConsumerName: spec.ConsumerName, EventID: env["eventId"].(string),
		AttemptID: testfix.NewUUID(), AttemptNumber: 1,
		ExpectedReceiptType: info.ReceiptType, ExpectedReceiptSchemaVersion: info.SchemaVersion,
		RequiredProjectionName: spec.ProjectionName, RequiredProjectionVersion: spec.ProjectionVersion,
		Envelope: c, EnvelopeDigestAlgorithmVersion: canon.Algorithm, EnvelopeSHA256: sha,
	}
}

// Env is a valid envelope of key on aggregate/revision.
func Env(key consumer.EventKey, aggregate string, revision int64) map[string]any {
	return testfix.Envelope(key.EventType, key.SchemaVersion, aggregate, revision)
}

// Deliver hands d to the kit c (30 s bound) and returns its result.
func Deliver(t *testing.T, c *consumer.Consumer, d wire.Delivery) wire.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Deliver(ctx, d)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	return r
}

// WantAck fails unless r acknowledged, and returns its receipt.
func WantAck(t *testing.T, r wire.Result) receipt.Document {
	t.Helper()
	if r.Status != wire.Acknowledged {
		t.Fatalf("result = %s %s (%s), want acknowledged", r.Status, r.Code, r.Ref)
	}
	if err := testdb.Receipts(t).CheckAck(r.Ack, r.Receipt); err != nil {
		t.Fatalf("ack does not match receipt: %v", err)
	}
	d, err := testdb.Receipts(t).Parse(r.Receipt)
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	return d
}

// Want fails unless r has the given status and code.
func Want(t *testing.T, r wire.Result, status wire.Status, code string) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("result = %s %s (%s), want %s %s", r.Status, r.Code, r.Ref, status, code)
	}
	if r.Ack != nil || r.Receipt != nil {
		t.Fatalf("a %s answer carries an ack/receipt", r.Status)
	}
}

// Count runs a count query (one integer) on db.
func Count(t *testing.T, db pgcall.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Effects is the effects counter of the reference consumer spec for an event (0 when absent).
func Effects(t *testing.T, db pgcall.DBTX, spec reference.Spec, eventID string) int {
	t.Helper()
	var n int
	err := db.QueryRow(context.Background(), `SELECT applied_count FROM `+pgx.Identifier{spec.Schema}.Sanitize()+
		`.effects WHERE event_id = $1::uuid`, eventID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Receipts is the number of inbox receipts of consumerName for eventID.
func Receipts(t *testing.T, db pgcall.DBTX, consumerName, eventID string) int {
	t.Helper()
	return Count(t, db, `SELECT count(*) FROM inbox.inbox_receipts WHERE consumer_name = $1 AND event_id = $2::uuid`,
		consumerName, eventID)
}

// SQLState is the SQLSTATE carried by err, or "".
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// MutateKit builds the kit of consumer name in its one-round-trip (Mutate) form on pool.
func (b *Bundle) MutateKit(t *testing.T, pool *pgxpool.Pool, name string, edit func(*consumer.Config)) *consumer.Consumer {
	t.Helper()
	spec := Spec(t, name)
	if !spec.OneRoundTrip() {
		t.Fatalf("%s has no Mutate form", name)
	}
	cfg := spec.Config(pool)
	cfg.Role = Role
	if edit != nil {
		edit(&cfg)
	}
	c, err := consumer.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
