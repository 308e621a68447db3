// Command sqldefs keeps the current-definition files under sql/functions and sql/triggers
// (docs/migrations.md) in step with the migrations. It installs sql/ into a throw-away database
// on the cluster of -server (default $DATABASE_URL, a superuser URL of its maintenance database),
// renders every kernel function and trigger (internal/sqldefs) and then:
//
//	sqldefs                       (make sql-defs) writes the files, deletes files no object has
//	sqldefs -check                exits 1 when a file differs from a fresh install
//	sqldefs -migration NAME       (make migration NAME=...) writes the next sql/NNN_NAME.sql from
//	                              the files that differ from a fresh install, installs it into a
//	                              second throw-away database and rewrites the files from that
//	                              install (pg_get_functiondef's form)
//
// The output depends only on sql/: the same tree gives the same bytes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/sqldefs"
)

func main() {
	server := flag.String("server", os.Getenv("DATABASE_URL"), "superuser URL of the cluster's maintenance database")
	dir := flag.String("dir", "sql", "the sql/ folder")
	check := flag.Bool("check", false, "only report the files that differ from a fresh install; exit 1 if any")
	name := flag.String("migration", "", "write the next migration sql/NNN_<name>.sql from the changed files")
	flag.Parse()
	if *server == "" {
		log.Fatal("sqldefs: no -server and no DATABASE_URL")
	}
	ctx := context.Background()
	var err error
	switch {
	case *name != "":
		err = newMigration(ctx, *server, *dir, *name)
	case *check:
		var c sqldefs.Change
		c, err = changes(ctx, *server, *dir)
		if err == nil && !c.Empty() {
			report(c)
			os.Exit(1)
		}
	default:
		err = write(ctx, *server, *dir)
	}
	if err != nil {
		log.Fatalf("sqldefs: %v", err)
	}
}

// migrations returns the top-level migrations of dir only: tern would parse every .sql file
// below it as a template, and a definition file being edited need not be one.
func migrations(dir string) (fs.FS, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	m := fstest.MapFS{}
	var names []string
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		m[e.Name()] = &fstest.MapFile{Data: b, Mode: 0o644}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return m, names, nil
}

// render installs dir's migrations into a throw-away database and renders its definitions.
func render(ctx context.Context, server, dir string) (*sqldefs.Defs, error) {
	fsys, _, err := migrations(dir)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("pgoutbox_sqldefs_%d", os.Getpid())
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer admin.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+id+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		return nil, err
	}
	defer admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)") //nolint:errcheck
	conn, err := pgx.Connect(ctx, migrate.WithDatabase(server, name))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	m, err := ternmigrate.NewMigrator(ctx, conn, migrate.VersionTable)
	if err != nil {
		return nil, err
	}
	if err := m.LoadMigrations(fsys); err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("install %s into a fresh database: %w", dir, err)
	}
	return sqldefs.Render(ctx, conn, sqldefs.FileHeaders(os.DirFS(dir)))
}

func changes(ctx context.Context, server, dir string) (sqldefs.Change, error) {
	defs, err := render(ctx, server, dir)
	if err != nil {
		return sqldefs.Change{}, err
	}
	disk, err := sqldefs.Files(os.DirFS(dir))
	if err != nil {
		return sqldefs.Change{}, err
	}
	return sqldefs.Changes(defs, disk), nil
}

func report(c sqldefs.Change) {
	for _, p := range c.Apply {
		fmt.Printf("differs from a fresh install: sql/%s\n", p)
	}
	for p := range c.Drops {
		fmt.Printf("no file for objects of a fresh install: sql/%s\n", p)
	}
}

// write makes the files those of a fresh install of dir.
func write(ctx context.Context, server, dir string) error {
	defs, err := render(ctx, server, dir)
	if err != nil {
		return err
	}
	disk, err := sqldefs.Files(os.DirFS(dir))
	if err != nil {
		return err
	}
	changed, missing, extra := sqldefs.Diff(defs.Files, disk)
	for _, p := range append(append([]string{}, changed...), missing...) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, defs.Files[p], 0o644); err != nil {
			return err
		}
	}
	for _, p := range extra {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	for _, d := range sqldefs.Dirs { // folders left empty
		entries, _ := os.ReadDir(filepath.Join(dir, d))
		for _, e := range entries {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(dir, d, e.Name())) // only succeeds when empty
			}
		}
	}
	fmt.Printf("sqldefs: %d files, %d rewritten, %d new, %d deleted\n", len(defs.Files), len(changed), len(missing), len(extra))
	return nil
}

var createFunction = regexp.MustCompile(`(?im)^\s*CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE)\s`)

// creates counts the functions a definition file creates.
func creates(b []byte) int { return len(createFunction.FindAll(b, -1)) }

var migrationName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// newMigration writes the next migration from the changed files, once, then installs it into a
// fresh database and rewrites the files from that install.
func newMigration(ctx context.Context, server, dir, name string) error {
	if !migrationName.MatchString(name) {
		return fmt.Errorf("NAME %q: lower case letters, digits and _", name)
	}
	_, names, err := migrations(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.TrimSuffix(n[strings.Index(n, "_")+1:], ".sql") == name {
			return fmt.Errorf("sql/%s exists already: a migration is written once (edit it, or choose another NAME)", n)
		}
	}
	c, err := changes(ctx, server, dir)
	if err != nil {
		return err
	}
	if c.Empty() {
		return fmt.Errorf("no definition file under sql/functions or sql/triggers differs from a fresh install: nothing to migrate")
	}
	file := fmt.Sprintf("%03d_%s.sql", len(names)+1, name)
	full := filepath.Join(dir, file)
	if err := os.WriteFile(full, sqldefs.Migration(file, c), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s from:\n", full)
	report(c)
	// the files a fresh install with the new migration has (pg_get_functiondef's form)
	if err := write(ctx, server, dir); err != nil {
		return fmt.Errorf("%s does not install yet (%v): edit it, then run make sql-defs", full, err)
	}
	// CREATE OR REPLACE with another signature adds an overload: the old one needs a DROP
	after, err := sqldefs.Files(os.DirFS(dir))
	if err != nil {
		return err
	}
	for _, p := range c.Apply {
		if n, m := creates(after[p]), creates(c.Files[p]); n > m {
			fmt.Printf("sql/%s: a fresh install now has %d functions of this name, your file created %d: "+
				"a signature changed? DROP FUNCTION the old one in %s, then run make sql-defs\n", p, n, m, full)
		}
	}
	fmt.Printf("Review %s (describe it; DROP FUNCTION an old signature), run make sql-defs after editing it, and commit both.\n", full)
	return nil
}
