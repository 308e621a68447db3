// Package intakefix is shared by tests/intake and tests/projection. Helpers of the observation
// intake tests (SPEC §11a R-OB-1..R-OB-7, T-9): a migrated database with two registered workloads
// (two NOLOGIN roles, members of outbox_intake), one role that is a member of outbox_intake but
// not registered (OB704), a test schema per reference type and a normalization policy. Every call
// is made as the role a real caller uses.
package intakefix

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// The two registered workloads and their roles, and a member of outbox_intake that is not
// registered (OB704).
const (
	RoleA     = "outbox_test_edge_a"
	RoleB     = "outbox_test_edge_b"
	RoleUnreg = "outbox_test_edge_unregistered"
	WorkloadA = "wp-edge-a"
	WorkloadB = "wp-edge-b"
)

// ikSchemaRequest: a closed request-attempt body with a discriminator (outcome), a branch-only
// error code under a normalization policy, a nullable member and bounded members.
const ikSchemaRequest = `{
  "members": {
    "requestId":      {"type": "string", "required": true, "minLength": 1, "maxLength": 64},
    "outcome":        {"type": "enum", "required": true, "values": ["succeeded", "failed"]},
    "httpStatus":     {"type": "integer", "minimum": 100, "maximum": 599},
    "durationMs":     {"type": "integer", "minimum": 0},
    "replayed":       {"type": "boolean"},
    "runId":          {"type": "uuid"},
    "startedAt":      {"type": "timestamp"},
    "label":          {"type": "string", "nullable": true, "maxLength": 32},
    "normalizedCode": {"type": "string", "branches": ["failed"], "required": true},
    "errorNormalizationPolicyVersion": {"type": "string", "branches": ["failed"], "required": true}
  },
  "discriminator": "outcome",
  "policyVersionMember": "errorNormalizationPolicyVersion",
  "normalizedCodeMember": "normalizedCode"
}`

// Bundle is one intake test database and a connection per role the tests use.
type Bundle struct {
	Dsn     string
	Admin   *pgx.Conn // superuser: fixtures and assertions only
	Reg     *pgx.Conn // outbox_registrar
	EdgeA   *pgx.Conn // workload A
	EdgeB   *pgx.Conn // workload B
	Unreg   *pgx.Conn // member of outbox_intake, not registered
	Auditor *pgx.Conn // outbox_auditor
	Ret     *pgx.Conn // outbox_retention
}

// ikEnsureRoles creates the test's workload roles (cluster-wide, idempotent, tolerant of a
// parallel test creating them at the same moment).
func ikEnsureRoles(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	for _, r := range []string{RoleA, RoleB, RoleUnreg} {
		q := fmt.Sprintf(`DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN
				BEGIN CREATE ROLE %[1]s NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
			END IF;
			IF NOT pg_has_role('%[1]s', 'outbox_intake', 'MEMBER') THEN
				BEGIN GRANT outbox_intake TO %[1]s; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
			END IF;
		END $$`, r)
		// Roles are cluster-wide and parallel tests (each in a database of its own) create the
		// same ones: a session that lost the race may not see the winner's role in the same
		// statement yet (42704), so the idempotent block is simply run again.
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if _, err = admin.Exec(context.Background(), q); err == nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("role %s: %v", r, err)
		}
	}
}

// Opts are the quota and size limits of the two workloads Setup registers.
type Opts struct {
	MaxPerMinute, MaxBodyBytes int
	// referenceSchemas: no test schema; the caller registers the reference release's
	// request_attempt@1 and error_occurrence@1 instead
	ReferenceSchemas bool
}

// Setup creates a fresh database with the two workloads registered (limits o), the test schemas
// and the normalization policy.
func Setup(t *testing.T, o Opts) Bundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.URL(t)
	b := Bundle{Dsn: dsn, Admin: testdb.Conn(t, dsn, "")}
	ikEnsureRoles(t, b.Admin)
	b.Reg = testdb.Conn(t, dsn, "outbox_registrar")
	for _, w := range []pgcall.RegisterWorkloadParams{
		{DBRole: RoleA, WorkloadPrincipalID: WorkloadA, Service: "api-edge", Environment: "test",
			MaxPerMinute: o.MaxPerMinute, MaxBodyBytes: o.MaxBodyBytes, DeploymentID: "edge-a-1"},
		{DBRole: RoleB, WorkloadPrincipalID: WorkloadB, Service: "worker-edge", Environment: "test",
			MaxPerMinute: o.MaxPerMinute, MaxBodyBytes: o.MaxBodyBytes},
	} {
		if err := pgcall.RegisterWorkload(ctx, b.Reg, w); err != nil {
			t.Fatal(err)
		}
	}
	if o.ReferenceSchemas {
		// nothing: the caller registers the reference release
	} else if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "request_attempt", 1, json.RawMessage(ikSchemaRequest)); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RegisterNormalizationPolicy(ctx, b.Reg, WorkloadA, "policy-1", []string{"upstream_timeout", "quota_denied"}); err != nil {
		t.Fatal(err)
	}
	b.EdgeA = testdb.Conn(t, dsn, RoleA)
	b.EdgeB = testdb.Conn(t, dsn, RoleB)
	b.Unreg = testdb.Conn(t, dsn, RoleUnreg)
	b.Auditor = testdb.Conn(t, dsn, "outbox_auditor")
	b.Ret = testdb.Conn(t, dsn, "outbox_retention")
	return b
}

// Sub is a Submission@1 with a valid succeeded request-attempt body; mutate the map to vary it.
func Sub(id string) map[string]any {
	return map[string]any{
		"observationId":            id,
		"observationType":          "request_attempt",
		"observationSchemaVersion": 1,
		"body": map[string]any{
			"requestId":  "req-" + id[:8],
			"outcome":    "succeeded",
			"httpStatus": 200,
			"durationMs": 12,
		},
	}
}

// JSON marshals v; the test fails on error.
func JSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Accept submits docs (raw JSON texts) as one batch on conn.
func Accept(t *testing.T, conn pgcall.DBTX, docs ...json.RawMessage) []pgcall.ObservationOutcome {
	t.Helper()
	arr := []byte("[")
	for i, d := range docs {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, d...)
	}
	arr = append(arr, ']')
	out, err := pgcall.AcceptObservations(context.Background(), conn, arr)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(docs) {
		t.Fatalf("%d outcomes for %d submissions", len(out), len(docs))
	}
	return out
}

// One accepts one observation doc on conn and returns its outcome.
func One(t *testing.T, conn pgcall.DBTX, doc json.RawMessage) pgcall.ObservationOutcome {
	t.Helper()
	o, err := pgcall.AcceptObservation(context.Background(), conn, doc)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Want fails unless o has the given outcome and SQLSTATE.
func Want(t *testing.T, o pgcall.ObservationOutcome, outcome, sqlstate string) {
	t.Helper()
	if o.Outcome != outcome || o.SQLState != sqlstate {
		t.Fatalf("outcome %s/%q (%s), want %s/%q", o.Outcome, o.SQLState, o.Detail, outcome, sqlstate)
	}
}

// Count runs a count query (one integer) on db.
func Count(t *testing.T, db *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var _ = testfix.NewUUID

// Fixture runs one fixture statement as the superuser below the kernel's triggers (SET LOCAL
// session_replication_role = replica, in a transaction of its own): since migration 044 every
// write of the intake tables outside its kernel function is OB202 for every role, so a test that
// fabricates a state (an expired lease, a filled quota minute) does it this way, visibly.
func Fixture(t *testing.T, admin *pgx.Conn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("fixture %s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
