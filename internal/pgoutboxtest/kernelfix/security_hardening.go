package kernelfix

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// WantSQLState fails unless err carries SQLSTATE code, naming the call that should have failed.
func WantSQLState(t *testing.T, err error, code, what string) {
	t.Helper()
	if got := pgcall.SQLState(err); got != code {
		t.Fatalf("%s: want SQLSTATE %s, got %v", what, code, err)
	}
}

// Login creates a LOGIN role (cluster-wide, so the name is unique per test and dropped at the
// end) that is a member of the given group roles, and returns a connection string for it on
// dsn's database (the local cluster trusts local connections).
func Login(t *testing.T, admin *pgx.Conn, dsn string, groups ...string) (string, string) {
	t.Helper()
	ctx := context.Background()
	name := "sh_" + strings.ReplaceAll(testfix.NewUUID()[:13], "-", "")
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'sh'`, name)); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if _, err := admin.Exec(ctx, fmt.Sprintf(`GRANT %s TO %s`, g, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE IF EXISTS %s`, name, name))
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, "sh")
	return name, u.String()
}
