package kernel

// Issue 34 item 5, docs/migrations.md: sql/functions/<schema>/<function>.sql and
// sql/triggers/<schema>/<table>.sql are the current definitions of every kernel function and
// trigger. A fresh install (all migrations) must have exactly those definitions: a definition
// file edited without a migration, or a migration whose result is not in the files, fails here.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/sqldefs"
)

const sqlDir = "../../sql"

// sqlDefsRender renders the definitions of the database behind conn, keeping the files' headers.
func sqlDefsRender(t *testing.T, conn *pgx.Conn) *sqldefs.Defs {
	t.Helper()
	defs, err := sqldefs.Render(context.Background(), conn, sqldefs.FileHeaders(os.DirFS(sqlDir)))
	if err != nil {
		t.Fatalf("render the definitions of a fresh install: %v", err)
	}
	return defs
}

func TestSQLDefinitionsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "")
	defs := sqlDefsRender(t, conn)
	disk, err := sqldefs.Files(os.DirFS(sqlDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs.Files) < 200 || len(disk) < 200 {
		t.Fatalf("%d definitions in a fresh install, %d files: want every kernel function and trigger", len(defs.Files), len(disk))
	}
	changed, missing, extra := sqldefs.Diff(defs.Files, disk)
	for _, p := range changed {
		t.Errorf("sql/%s differs from a fresh install (- fresh install, + the file):\n%s\nIf you edited it: run make migration NAME=<what_changes> to write the migration that installs it. "+
			"If a new migration changed the object: run make sql-defs (docs/migrations.md).",
			p, lineDiff(string(defs.Files[p]), string(disk[p])))
	}
	for _, p := range missing {
		t.Errorf("sql/%s is missing: a fresh install has these objects. Run make sql-defs to write it, or, "+
			"if you deleted it to drop them, make migration NAME=<what_changes> (docs/migrations.md).", p)
	}
	for _, p := range extra {
		t.Errorf("sql/%s has no object in a fresh install: run make migration NAME=<what_changes> to create it "+
			"(or make sql-defs to delete a file whose objects a migration dropped; docs/migrations.md).", p)
	}
	if t.Failed() {
		return
	}

	// The files are literal SQL: applied to the fresh install as the owner (functions first, a
	// trigger executes one) they change nothing.
	var paths []string
	for p := range disk {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_owner`); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := tx.Exec(ctx, string(disk[p])); err != nil {
			t.Fatalf("apply sql/%s to a fresh install: %v", p, err)
		}
	}
	if _, err := tx.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
	again, err := sqldefs.Render(ctx, tx.Conn(), sqldefs.FileHeaders(os.DirFS(sqlDir)))
	if err != nil {
		t.Fatal(err)
	}
	if c, m, e := sqldefs.Diff(again.Files, disk); len(c)+len(m)+len(e) != 0 {
		t.Errorf("applying the definition files changed the definitions: %v %v %v", c, m, e)
		for _, p := range c {
			t.Errorf("sql/%s after applying it:\n%s", p, lineDiff(string(disk[p]), string(again.Files[p])))
		}
	}
}

// The files must fail when they should: an edited body, comment or grant is a difference.
func TestSQLDefinitionsDiff(t *testing.T) {
	t.Parallel()
	disk, err := sqldefs.Files(os.DirFS(sqlDir))
	if err != nil {
		t.Fatal(err)
	}
	p := "functions/outbox/append_event.sql"
	if _, ok := disk[p]; !ok {
		t.Fatalf("sql/%s not found", p)
	}
	edited := map[string][]byte{}
	for k, v := range disk {
		edited[k] = v
	}
	edited[p] = bytes.Replace(disk[p], []byte("TO outbox_producer"), []byte("TO outbox_auditor"), 1)
	edited["functions/outbox/no_such_function.sql"] = []byte("SELECT 1;\n")
	delete(edited, "triggers/outbox/outbox_events.sql")
	changed, missing, extra := sqldefs.Diff(disk, edited)
	got := fmt.Sprint(changed, missing, extra)
	if want := "[functions/outbox/append_event.sql] [triggers/outbox/outbox_events.sql] [functions/outbox/no_such_function.sql]"; got != want {
		t.Fatalf("diff %s, want %s", got, want)
	}
}

// make migration's file: the changed files' SQL as the owner, deleted files' objects dropped
// (a trigger before its function), written once.
func TestSQLDefinitionsMigrationFile(t *testing.T) {
	t.Parallel()
	fresh := &sqldefs.Defs{
		Files: map[string][]byte{
			"functions/outbox/f.sql":    []byte("-- f\nCREATE OR REPLACE FUNCTION outbox.f() ...;\n"),
			"functions/outbox/tg_t.sql": []byte("CREATE OR REPLACE FUNCTION outbox.tg_t() ...;\n"),
			"triggers/outbox/t.sql":     []byte("CREATE OR REPLACE TRIGGER tg_t ...;\n"),
		},
		Drops: map[string][]string{
			"functions/outbox/f.sql":    {"DROP FUNCTION outbox.f();"},
			"functions/outbox/tg_t.sql": {"DROP FUNCTION outbox.tg_t();"},
			"triggers/outbox/t.sql":     {"DROP TRIGGER tg_t ON outbox.t;"},
		},
	}
	disk := map[string][]byte{
		"functions/outbox/f.sql": []byte("-- f, changed\nCREATE OR REPLACE FUNCTION outbox.f() ...;\n"),
		"functions/outbox/g.sql": []byte("CREATE OR REPLACE FUNCTION outbox.g() ...;\n"),
	}
	c := sqldefs.Changes(fresh, disk)
	got := string(sqldefs.Migration("041_foo.sql", c))
	for _, want := range []string{
		"SET LOCAL ROLE outbox_owner;\n",
		"DROP TRIGGER tg_t ON outbox.t;\n",
		"DROP FUNCTION outbox.tg_t();\n",
		"-- f, changed\nCREATE OR REPLACE FUNCTION outbox.f() ...;\n",
		"CREATE OR REPLACE FUNCTION outbox.g() ...;\n",
		"\nRESET ROLE;\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("migration lacks %q:\n%s", want, got)
		}
	}
	order := regexp.MustCompile(`(?s)^-- 041_foo: .*SET LOCAL ROLE outbox_owner;.*DROP TRIGGER.*DROP FUNCTION outbox\.tg_t.*outbox\.f\(\).*outbox\.g\(\).*RESET ROLE;\n$`)
	if !order.MatchString(got) {
		t.Errorf("migration out of order:\n%s", got)
	}
	if strings.Contains(got, "DROP FUNCTION outbox.f()") {
		t.Errorf("a changed file is re-created, not dropped:\n%s", got)
	}
	if c := sqldefs.Changes(fresh, fresh.Files); !c.Empty() {
		t.Errorf("no change expected, got %+v", c)
	}
}

// sql/roles/create_roles.sql lists the kernel's roles: exactly the roles a fresh install grants
// to or owns by, and applying it to a fresh install changes nothing.
func TestSQLRolesCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(sqlDir, "roles", "create_roles.sql"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)ARRAY\[([^\]]*)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("sql/roles/create_roles.sql: no ARRAY[...] of role names")
	}
	var listed []string
	for _, r := range regexp.MustCompile(`'([a-z_]+)'`).FindAllSubmatch(m[1], -1) {
		listed = append(listed, string(r[1]))
	}
	sort.Strings(listed)
	conn := testdb.Conn(t, testdb.URL(t), "")
	rows, err := conn.Query(ctx, `
WITH ns AS (SELECT oid, nspname, nspowner, nspacl FROM pg_namespace WHERE nspname IN ('outbox', 'inbox', 'intake', 'mailbox')),
     r AS (SELECT nspowner AS role FROM ns
           UNION SELECT (aclexplode(nspacl)).grantee FROM ns
           UNION SELECT c.relowner FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
           UNION SELECT (aclexplode(c.relacl)).grantee FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
           UNION SELECT p.proowner FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
           UNION SELECT (aclexplode(p.proacl)).grantee FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace)
SELECT rolname FROM pg_roles JOIN r ON r.role = pg_roles.oid ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	granted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(listed, " ") != strings.Join(granted, " ") {
		t.Fatalf("sql/roles/create_roles.sql lists %v; a fresh install owns by or grants to %v", listed, granted)
	}
	for _, f := range []string{"create_roles.sql", "mailbox_read_all_stats.sql"} {
		b, err := os.ReadFile(filepath.Join(sqlDir, "roles", f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("{{")) {
			t.Errorf("sql/roles/%s contains a template: role definitions are literal SQL", f)
		}
		if _, err := conn.Exec(ctx, string(b)); err != nil {
			t.Errorf("apply sql/roles/%s to a fresh install: %v", f, err)
		}
	}
}
