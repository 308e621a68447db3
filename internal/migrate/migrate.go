// Package migrate applies the tern migrations in sql/ with tern's own migrator, the code path the
// tern CLI (`make migrate`) uses, and hashes the migrations for pgtestdb templates.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	sqlfiles "github.com/oceanway/pgoutbox/sql"
)

// VersionTable is tern's default version table; the CLI and this package share it.
const VersionTable = "public.schema_version"

// FS returns the migrations (sql/NNN_*.sql; the definition files are not embedded).
func FS() fs.FS { return sqlfiles.FS }

// Hash covers the name and content of every embedded file (the migrations), so that a new
// migration yields a new template database.
func Hash() (string, error) {
	h := sha256.New()
	var paths []string
	err := fs.WalkDir(sqlfiles.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := fs.ReadFile(sqlfiles.FS, p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Up migrates the database behind conn to the newest version.
func Up(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("new migrator: %w", err)
	}
	if err := m.LoadMigrations(sqlfiles.FS); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
