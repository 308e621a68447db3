// Package projectionfix holds the projection-version and cutover fixtures that tests/projection
// and tests/readmodel share (SPEC §11b): a database with operations_timeline@2 registered as
// shadow, shadow receipts and drains.
package projectionfix

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// Versions lists the registry as "name@version:state:digest" lines in key order.
func Versions(t *testing.T, db pgcall.DBTX) string {
	t.Helper()
	var s *string
	if err := db.QueryRow(context.Background(), `SELECT string_agg(projection_name || '@' || projection_version || ':' || state || ':' ||
		semantic_definition_sha256, ' ' ORDER BY projection_name, projection_version) FROM outbox.projection_versions`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// Fixture: a database with the reference release active, operations_timeline@1 active (by
// the activation) and @2 registered as shadow, connections for every role the tests use.
type Fixture struct {
	kernelfix.RetentionBundle
	Ik   intakefix.Bundle
	Reg  *pgx.Conn // outbox_registrar
	Proj *pgx.Conn // outbox_projector
}

// Setup creates the Fixture.
func Setup(t *testing.T) Fixture {
	t.Helper()
	ik := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 100000, MaxBodyBytes: 16384})
	testfix.ActivateReference(t, ik.Admin)
	f := Fixture{Ik: ik, Reg: ik.Reg, Proj: testdb.Conn(t, ik.Dsn, "outbox_projector")}
	f.RetentionBundle = kernelfix.RetentionBundle{Bundle: kernelfix.Bundle{Dsn: ik.Dsn, Admin: ik.Admin, Disp: testdb.Conn(t, ik.Dsn, "outbox_dispatcher")},
		Ret: ik.Ret, Auditor: ik.Auditor, Cons: testdb.Conn(t, ik.Dsn, "outbox_consumer")}
	if got, err := pgcall.RegisterProjectionVersion(context.Background(), f.Reg, "operations_timeline", 2, strings.Repeat("c", 64)); err != nil || got != pgcall.ProjectionVersionRegistered {
		t.Fatalf("register operations_timeline@2: %q, %v", got, err)
	}
	return f
}
