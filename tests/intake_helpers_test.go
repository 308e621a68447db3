package tests

// Helpers of the observation intake tests (SPEC §11a R-OB-1..R-OB-7, T-9): a migrated database
// with two registered workloads (two NOLOGIN roles, members of outbox_intake), one role that is
// a member of outbox_intake but not registered (OB704), a test schema per reference type and a
// normalization policy. Every call is made as the role a real caller uses. Prefixed ik.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

const (
	ikRoleA     = "outbox_test_edge_a"
	ikRoleB     = "outbox_test_edge_b"
	ikRoleUnreg = "outbox_test_edge_unregistered"
	ikWorkloadA = "wp-edge-a"
	ikWorkloadB = "wp-edge-b"
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

type ikBundle struct {
	dsn     string
	admin   *pgx.Conn // superuser: fixtures and assertions only
	reg     *pgx.Conn // outbox_registrar
	edgeA   *pgx.Conn // workload A
	edgeB   *pgx.Conn // workload B
	unreg   *pgx.Conn // member of outbox_intake, not registered
	auditor *pgx.Conn // outbox_auditor
	ret     *pgx.Conn // outbox_retention
}

// ikEnsureRoles creates the test's workload roles (cluster-wide, idempotent, tolerant of a
// parallel test creating them at the same moment).
func ikEnsureRoles(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	for _, r := range []string{ikRoleA, ikRoleB, ikRoleUnreg} {
		q := fmt.Sprintf(`DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN
				BEGIN CREATE ROLE %[1]s NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
			END IF;
			IF NOT pg_has_role('%[1]s', 'outbox_intake', 'MEMBER') THEN
				BEGIN GRANT outbox_intake TO %[1]s; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
			END IF;
		END $$`, r)
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("role %s: %v", r, err)
		}
	}
}

type ikOpts struct {
	maxPerMinute, maxBodyBytes int
	// referenceSchemas: no test schema; the caller registers the reference release's
	// request_attempt@1 and error_occurrence@1 instead
	referenceSchemas bool
}

func ikSetup(t *testing.T, o ikOpts) ikBundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.URL(t)
	b := ikBundle{dsn: dsn, admin: testdb.Conn(t, dsn, "")}
	ikEnsureRoles(t, b.admin)
	b.reg = testdb.Conn(t, dsn, "outbox_registrar")
	for _, w := range []pgcall.RegisterWorkloadParams{
		{DBRole: ikRoleA, WorkloadPrincipalID: ikWorkloadA, Service: "api-edge", Environment: "test",
			MaxPerMinute: o.maxPerMinute, MaxBodyBytes: o.maxBodyBytes, DeploymentID: "edge-a-1"},
		{DBRole: ikRoleB, WorkloadPrincipalID: ikWorkloadB, Service: "worker-edge", Environment: "test",
			MaxPerMinute: o.maxPerMinute, MaxBodyBytes: o.maxBodyBytes},
	} {
		if err := pgcall.RegisterWorkload(ctx, b.reg, w); err != nil {
			t.Fatal(err)
		}
	}
	if o.referenceSchemas {
		// nothing: the caller registers the reference release
	} else if _, err := pgcall.RegisterObservationSchema(ctx, b.reg, "request_attempt", 1, json.RawMessage(ikSchemaRequest)); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.RegisterNormalizationPolicy(ctx, b.reg, ikWorkloadA, "policy-1", []string{"upstream_timeout", "quota_denied"}); err != nil {
		t.Fatal(err)
	}
	b.edgeA = testdb.Conn(t, dsn, ikRoleA)
	b.edgeB = testdb.Conn(t, dsn, ikRoleB)
	b.unreg = testdb.Conn(t, dsn, ikRoleUnreg)
	b.auditor = testdb.Conn(t, dsn, "outbox_auditor")
	b.ret = testdb.Conn(t, dsn, "outbox_retention")
	return b
}

// ikSub is a Submission@1 with a valid succeeded request-attempt body; mutate the map to vary it.
func ikSub(id string) map[string]any {
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

func ikJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ikAccept submits docs (raw JSON texts) as one batch on conn.
func ikAccept(t *testing.T, conn pgcall.DBTX, docs ...json.RawMessage) []pgcall.ObservationOutcome {
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

func ikOne(t *testing.T, conn pgcall.DBTX, doc json.RawMessage) pgcall.ObservationOutcome {
	t.Helper()
	o, err := pgcall.AcceptObservation(context.Background(), conn, doc)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func ikWant(t *testing.T, o pgcall.ObservationOutcome, outcome, sqlstate string) {
	t.Helper()
	if o.Outcome != outcome || o.SQLState != sqlstate {
		t.Fatalf("outcome %s/%q (%s), want %s/%q", o.Outcome, o.SQLState, o.Detail, outcome, sqlstate)
	}
}

func ikCount(t *testing.T, db *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var _ = testfix.NewUUID
