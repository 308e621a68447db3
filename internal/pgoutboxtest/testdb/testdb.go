// Package testdb gives each test a fresh, fully migrated database cloned by pgtestdb from a
// template built with the project's own migrator (internal/migrate), on the cluster named by
// DATABASE_URL (set by `make test`; see scripts/pg.sh). New and URL: the kernel's migrations
// and the reference release's base (reference.InstallBase: receipt kinds, destinations,
// envelope refinements, mailbox effect - what the migrations installed before 041, SPEC D-1);
// NewKernel and KernelURL: the kernel's migrations only.
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver for pgtestdb
	"github.com/peterldowns/pgtestdb"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// migrator builds the template: the kernel's migrations, then (withReference) the reference
// release's base. The hash covers both, so a changed reference definition builds a new template.
type migrator struct{ withReference bool }

func (m migrator) Hash() (string, error) {
	h, err := migrate.Hash()
	if err != nil || !m.withReference {
		return h, err
	}
	return h + "+reference-" + reference.InstallHash(), nil
}

// Template builds take migrate.ClusterLockKey in the maintenance database: the migrations create
// the kernel's roles, which are cluster-wide, and on a fresh cluster two templates (kernel only,
// kernel with the reference release) built at once by two packages' test binaries race on CREATE
// ROLE, the loser not seeing the winner's role yet (42704). pgtestdb serializes builds of one
// template only.
func (m migrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	if server := os.Getenv("DATABASE_URL"); server != "" {
		lock, err := pgx.Connect(ctx, server)
		if err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		defer lock.Close(context.Background()) // closing the session releases the lock
		if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrate.ClusterLockKey)); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
	}
	conn, err := pgx.Connect(ctx, conf.URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := migrate.Up(ctx, conn); err != nil {
		return err
	}
	if !m.withReference {
		return nil
	}
	return reference.InstallBase(ctx, conn)
}

// Config returns the pgtestdb configuration derived from DATABASE_URL. The test role is a
// superuser so that tests can SET ROLE to every kernel role and exercise the real grants.
func Config(t testing.TB) pgtestdb.Config {
	t.Helper()
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test` (it starts the local cluster)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse DATABASE_URL: %v", err)
	}
	pw, _ := u.User.Password()
	opts := u.Query()
	if opts.Get("sslmode") == "" {
		opts.Set("sslmode", "disable")
	}
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       u.Port(),
		User:       u.User.Username(),
		Password:   pw,
		Database:   strings.TrimPrefix(u.Path, "/"),
		Options:    opts.Encode(),
		TestRole: &pgtestdb.Role{
			Username:     "pgoutbox_test",
			Password:     "pgoutbox_test",
			Capabilities: "SUPERUSER",
		},
		ForceTerminateConnections: true,
	}
}

// URL creates a fresh migrated database with the reference release's base installed and returns
// its connection string.
func URL(t testing.TB) string {
	t.Helper()
	conf := pgtestdb.Custom(t, Config(t), migrator{withReference: true})
	return conf.URL()
}

// New creates a fresh migrated database with the reference release's base installed and returns
// a pool connected to it as a superuser.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Pool(t, URL(t))
}

// KernelURL creates a fresh database with the kernel's migrations only (no destination, no
// domain receipt kind, no refinement: SPEC D-1) and returns its connection string.
func KernelURL(t testing.TB) string {
	t.Helper()
	conf := pgtestdb.Custom(t, Config(t), migrator{})
	return conf.URL()
}

// NewKernel creates a fresh kernel-only database (KernelURL) and returns a superuser pool.
func NewKernel(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Pool(t, KernelURL(t))
}

// Pool opens a pool on dsn that is closed when the test ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse pool config: %v", err)
	}
	cfg.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Conn opens a single connection on dsn, optionally switched to role (SET ROLE), closed when
// the test ends. Tests use it to call the SQL API as the role a real caller would use.
func Conn(t testing.TB, dsn, role string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if role != "" {
		if _, err := conn.Exec(ctx, fmt.Sprintf("SET ROLE %s", pgx.Identifier{role}.Sanitize())); err != nil {
			t.Fatalf("set role %s: %v", role, err)
		}
	}
	return conn
}

var (
	receiptsMu sync.Mutex
	receipts   *receipt.Catalog
)

// Receipts returns the receipt catalog of a freshly migrated database (receipt.LoadCatalog),
// loaded once per test binary: the kinds every test database starts with. A test that registers a
// kind at runtime loads its own catalog from its database.
func Receipts(t testing.TB) *receipt.Catalog {
	t.Helper()
	receiptsMu.Lock()
	defer receiptsMu.Unlock()
	if receipts == nil {
		conn := Conn(t, URL(t), "outbox_auditor")
		c, err := receipt.LoadCatalog(context.Background(), conn)
		if err != nil {
			t.Fatalf("load receipt catalog: %v", err)
		}
		receipts = c
	}
	return receipts
}
