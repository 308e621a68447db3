package tests

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
)

// registrySetup returns a connection switched to outbox_registrar on a fresh database.
func registrySetup(t *testing.T) (string, pgcall.DBTX) {
	t.Helper()
	dsn := testdb.URL(t)
	return dsn, testdb.Conn(t, dsn, "outbox_registrar")
}

// mutateRelease decodes the reference release, applies f, and returns the document with a
// correctly computed digest (so that only the rule under test is broken).
func mutateRelease(t *testing.T, f func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(testfix.ReferenceRelease(t), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "deliverySetDefinitionDigest")
	f(m)
	d, err := canon.Digest(m)
	if err != nil {
		d = zeros64 // not canonicalizable: the database must refuse it before looking at the digest
	}
	m["deliverySetDefinitionDigest"] = d
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func members(m map[string]any) []any { return m["members"].([]any) }
func member(m map[string]any, i int) map[string]any {
	return members(m)[i].(map[string]any)
}

// R-DS-4: registering the reference release returns its quartet; the identical document again
// is a no-op returning the same quartet; the members and applicable events are stored as rows.
func TestRegisterReferenceReleaseIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := registrySetup(t)
	doc := testfix.ReferenceRelease(t)
	q1, err := pgcall.RegisterDeliverySet(ctx, db, doc, reference.SourceRelease)
	if err != nil {
		t.Fatal(err)
	}
	if q1.DeliverySetVersion != 1 || q1.DefinitionSchemaVersion != 1 || q1.DigestAlgorithmVersion != "jcs-sha256-v1" || len(q1.DefinitionDigest) != 64 {
		t.Fatalf("unexpected quartet %+v", q1)
	}
	q2, err := pgcall.RegisterDeliverySet(ctx, db, doc, "again")
	if err != nil {
		t.Fatal(err)
	}
	if q1 != q2 {
		t.Fatalf("re-registration returned %+v, want %+v", q2, q1)
	}
	var versions, members, pairs int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox.delivery_set_versions),
		(SELECT count(*) FROM outbox.delivery_set_members WHERE mandatory),
		(SELECT count(*) FROM outbox.delivery_set_applicable_events)`).Scan(&versions, &members, &pairs); err != nil {
		t.Fatal(err)
	}
	// SPEC §3.4: 13 applicable pairs, 14 mandatory members.
	if versions != 1 || members != 14 || pairs != 13 {
		t.Fatalf("versions=%d members=%d pairs=%d, want 1/14/13", versions, members, pairs)
	}
	// The digest is the database's own computation over the candidate too (R-DS-3).
	var dbDigest string
	if err := db.QueryRow(ctx, `SELECT outbox.jcs_sha256((definition::jsonb - 'deliverySetDefinitionDigest')::json)
		FROM outbox.delivery_set_versions`).Scan(&dbDigest); err != nil {
		t.Fatal(err)
	}
	if dbDigest != q1.DefinitionDigest {
		t.Fatalf("stored definition digest %s, recomputed %s", q1.DefinitionDigest, dbDigest)
	}
}

// R-DS-1, R-DS-2, R-DS-3: every rejection rule is its own case, each with OB101, and nothing
// is registered.
func TestRegisterDeliverySetRejections(t *testing.T) {
	t.Parallel()
	type tc struct {
		name string
		doc  func(t *testing.T) json.RawMessage
	}
	withDigest := func(f func(m map[string]any)) func(t *testing.T) json.RawMessage {
		return func(t *testing.T) json.RawMessage { return mutateRelease(t, f) }
	}
	cases := []tc{
		{"unknown top-level field", withDigest(func(m map[string]any) { m["extra"] = true })},
		{"unknown member field", withDigest(func(m map[string]any) { member(m, 0)["weight"] = 1 })},
		{"missing field", withDigest(func(m map[string]any) { delete(m, "memberCount") })},
		{"unknown schema version", withDigest(func(m map[string]any) { m["deliverySetDefinitionSchemaVersion"] = 2 })},
		{"unknown digest algorithm", withDigest(func(m map[string]any) { m["deliverySetDefinitionDigestAlgorithmVersion"] = "sha256" })},
		{"unsorted applicable events", withDigest(func(m map[string]any) {
			a := m["applicableEvents"].([]any)
			a[0], a[1] = a[1], a[0]
		})},
		{"unsorted members", withDigest(func(m map[string]any) {
			a := members(m)
			a[0], a[1] = a[1], a[0]
		})},
		{"duplicate member", withDigest(func(m map[string]any) {
			m["members"] = append([]any{members(m)[0]}, members(m)...)
			m["memberCount"] = len(members(m))
		})},
		{"applicable count mismatch", withDigest(func(m map[string]any) { m["applicableEventCount"] = 12 })},
		{"member count mismatch", withDigest(func(m map[string]any) { m["memberCount"] = 15 })},
		{"orphan member", withDigest(func(m map[string]any) {
			a := m["applicableEvents"].([]any)
			m["applicableEvents"] = a[1:] // billing.case-resolution.applied@1 keeps its member
			m["applicableEventCount"] = len(a) - 1
		})},
		{"destination rebinding", withDigest(func(m map[string]any) { member(m, 0)["consumerName"] = "someone_else" })},
		{"unregistered destination", withDigest(func(m map[string]any) { member(m, 0)["destination"] = "nowhere" })},
		{"receipt type mismatch", withDigest(func(m map[string]any) { member(m, 0)["expectedReceiptType"] = "MeteringInputProcessorConsumerReceipt" })},
		{"receipt schema mismatch", withDigest(func(m map[string]any) { member(m, 0)["expectedReceiptSchemaVersion"] = 2 })},
		{"projection branch missing", withDigest(func(m map[string]any) {
			member(m, 0)["projectionTarget"] = map[string]any{"state": "not_applicable"}
		})},
		{"projection on non-projection destination", func(t *testing.T) json.RawMessage {
			return mutateRelease(t, func(m map[string]any) {
				for _, x := range members(m) {
					mm := x.(map[string]any)
					if mm["destination"] == "metering_input_processor" {
						mm["projectionTarget"] = map[string]any{"state": "required", "projectionName": "operations_timeline", "projectionVersion": 1}
						return
					}
				}
				t.Fatal("no metering member")
			})
		}},
		{"projection target with extra field", withDigest(func(m map[string]any) {
			member(m, 0)["projectionTarget"].(map[string]any)["note"] = "x"
		})},
		{"bare digest", func(t *testing.T) json.RawMessage {
			return json.RawMessage(`{"deliverySetDefinitionDigest":"` + zeros64 + `"}`)
		}},
		{"wrong digest", func(t *testing.T) json.RawMessage {
			var m map[string]any
			_ = json.Unmarshal(testfix.ReferenceRelease(t), &m)
			m["deliverySetDefinitionDigest"] = zeros64
			b, _ := json.Marshal(m)
			return b
		}},
		{"digest not hex", withDigest(func(m map[string]any) {})}, // replaced below
		{"duplicate key", func(t *testing.T) json.RawMessage {
			doc := string(testfix.ReferenceRelease(t))
			return json.RawMessage(`{"deliverySetVersion":1,` + doc[1:])
		}},
		{"non-integer version", withDigest(func(m map[string]any) { m["deliverySetVersion"] = 1.5 })},
		{"literal with upper case", withDigest(func(m map[string]any) { member(m, 0)["destination"] = "Core_Operations" })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, db := registrySetup(t)
			doc := c.doc(t)
			if c.name == "digest not hex" {
				var m map[string]any
				_ = json.Unmarshal(doc, &m)
				m["deliverySetDefinitionDigest"] = "ABC"
				doc, _ = json.Marshal(m)
			}
			_, err := pgcall.RegisterDeliverySet(ctx, db, doc, "test")
			if !errors.Is(err, pgcall.ErrDefinitionInvalid) {
				t.Fatalf("got %v, want OB101", err)
			}
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM outbox.delivery_set_versions`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("%d definitions registered after a rejection", n)
			}
		})
	}
}

const zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"

// R-DS-3, R-DS-4: the same version with a different candidate (and so digest) is OB102.
func TestRegisterDeliverySetVersionConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := registrySetup(t)
	if _, err := pgcall.RegisterDeliverySet(ctx, db, testfix.ReferenceRelease(t), "a"); err != nil {
		t.Fatal(err)
	}
	other := mutateRelease(t, func(m map[string]any) { member(m, 0)["mandatory"] = false })
	_, err := pgcall.RegisterDeliverySet(ctx, db, other, "b")
	if !errors.Is(err, pgcall.ErrVersionConflict) {
		t.Fatalf("got %v, want OB102", err)
	}
}

// R-DS-5: exactly one version is active; activation only selects a registered quartet.
func TestActivateDeliverySet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := registrySetup(t)
	q1, err := pgcall.RegisterDeliverySet(ctx, db, testfix.ReferenceRelease(t), "v1")
	if err != nil {
		t.Fatal(err)
	}
	q2, err := pgcall.RegisterDeliverySet(ctx, db, mutateRelease(t, func(m map[string]any) { m["deliverySetVersion"] = 2 }), "v2")
	if err != nil {
		t.Fatal(err)
	}
	unknown := q1
	unknown.DefinitionDigest = zeros64
	if err := pgcall.ActivateDeliverySet(ctx, db, unknown); !errors.Is(err, pgcall.ErrDefinitionInvalid) {
		t.Fatalf("activating an unregistered quartet: %v, want OB101", err)
	}
	for _, q := range []pgcall.Quartet{q1, q2, q2, q1} {
		if err := pgcall.ActivateDeliverySet(ctx, db, q); err != nil {
			t.Fatal(err)
		}
		var active, n int
		if err := db.QueryRow(ctx, `SELECT max(delivery_set_version), count(*) FROM outbox.delivery_set_versions WHERE status = 'active'`).Scan(&active, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 || active != q.DeliverySetVersion {
			t.Fatalf("after activating %d: %d active rows, active version %d", q.DeliverySetVersion, n, active)
		}
	}
}

// R-SEC-3: registry rows are immutable, even for the owner; only status moves, through the function.
func TestRegistryImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	testfix.ActivateReference(t, testdb.Conn(t, dsn, ""))
	owner := testdb.Conn(t, dsn, "outbox_owner")
	for _, stmt := range []string{
		`UPDATE outbox.delivery_set_versions SET definition = '{}'`,
		`UPDATE outbox.delivery_set_versions SET source_release = 'x'`,
		`DELETE FROM outbox.delivery_set_versions`,
		`UPDATE outbox.delivery_set_members SET mandatory = false`,
		`DELETE FROM outbox.delivery_set_members`,
		`DELETE FROM outbox.delivery_set_applicable_events`,
		`UPDATE outbox.delivery_destinations SET consumer_name = 'x'`,
		`DELETE FROM outbox.delivery_destinations WHERE destination = 'core_operations'`,
	} {
		_, err := owner.Exec(ctx, stmt)
		if pgcall.SQLState(err) != "OB202" {
			t.Errorf("%s: got %v, want OB202", stmt, err)
		}
	}
}

// R-DS-2, R-CL-7: register_destination is insert-or-compare; rebinding is refused.
func TestRegisterDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := registrySetup(t)
	call := func(dest, consumer, kind, typ string, ver int, proj bool, ordering string) error {
		_, err := db.Exec(ctx, `SELECT outbox.register_destination($1, $2, $3, $4, $5, $6, $7)`, dest, consumer, kind, typ, ver, proj, ordering)
		return err
	}
	// The seeded reference destination, identical: no-op.
	if err := call("core_operations", "operations_projector", "operations_projection", "OperationsProjectionAppliedReceipt", 1, true, "none"); err != nil {
		t.Fatal(err)
	}
	if err := call("core_operations", "other_consumer", "operations_projection", "OperationsProjectionAppliedReceipt", 1, true, "none"); pgcall.SQLState(err) != "OB101" {
		t.Fatalf("rebinding: %v, want OB101", err)
	}
	if err := call("events.broker", "jetstream", "broker_publication", "BrokerPublicationReceipt", 1, false, "per_aggregate"); err != nil {
		t.Fatal(err)
	}
	var ordering string
	var policies int
	if err := db.QueryRow(ctx, `SELECT ordering, (SELECT count(*) FROM outbox.delivery_destinations) FROM outbox.delivery_destinations WHERE destination = 'events.broker'`).Scan(&ordering, &policies); err != nil {
		t.Fatal(err)
	}
	if ordering != "per_aggregate" {
		t.Fatalf("ordering = %s", ordering)
	}
	for _, bad := range [][]any{
		{"Bad", "c", "broker_publication", "BrokerPublicationReceipt", 1, false, "none"},
		{"x", "c", "no_such_kind", "BrokerPublicationReceipt", 1, false, "none"},
		{"x", "c", "broker_publication", "OtherReceipt", 1, false, "none"},
		{"x", "c", "broker_publication", "BrokerPublicationReceipt", 1, false, "fifo"},
	} {
		if err := call(bad[0].(string), bad[1].(string), bad[2].(string), bad[3].(string), bad[4].(int), bad[5].(bool), bad[6].(string)); pgcall.SQLState(err) != "OB101" {
			t.Errorf("%v: got %v, want OB101", bad, err)
		}
	}
}
