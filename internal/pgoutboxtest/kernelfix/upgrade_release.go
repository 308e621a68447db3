package kernelfix

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// FreshDatabase creates an empty database on the test cluster and returns its URL.
func FreshDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		t.Fatal("DATABASE_URL is not set")
	}
	name := "pgoutbox_upgrade_" + strings.ReplaceAll(testfix.NewUUID()[:13], "-", "")
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = migrate.DropDatabase(context.Background(), server, name) })
	return migrate.WithDatabase(server, name)
}
