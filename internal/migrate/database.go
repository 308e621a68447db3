package migrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ClusterLockKey is the advisory lock (taken in the cluster's maintenance database) under which
// tools and tests build fresh databases one at a time: the migrations create the kernel's roles,
// which are cluster-wide, and two first installs at once race on CREATE ROLE (42704).
const ClusterLockKey = 7210094417

// FreshDatabase drops and recreates the database name on the cluster of serverURL (a superuser
// URL of its maintenance database), migrates it with the kernel's migrations and returns its URL
// (demo, soak).
func FreshDatabase(ctx context.Context, serverURL, name string) (string, error) {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("connect to the cluster: %w", err)
	}
	defer admin.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+id+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		return "", err
	}
	// The migrations create cluster-wide roles: builds of fresh databases on one cluster take turns
	// (ClusterLockKey, held by this maintenance session until it closes).
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(ClusterLockKey)); err != nil {
		return "", fmt.Errorf("migration lock: %w", err)
	}
	u := WithDatabase(serverURL, name)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if err := Up(ctx, conn); err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	return u, nil
}

// DropDatabase removes a database FreshDatabase created.
func DropDatabase(ctx context.Context, serverURL, name string) error {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// WithDatabase returns serverURL with its database replaced by db.
func WithDatabase(serverURL, db string) string {
	i := strings.LastIndex(serverURL, "/")
	rest := ""
	if q := strings.Index(serverURL[i:], "?"); q >= 0 {
		rest = serverURL[i+q:]
	}
	return serverURL[:i+1] + db + rest
}
