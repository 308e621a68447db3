// Package sqldefs writes and compares the current-definition files of the kernel's SQL objects
// (docs/migrations.md): sql/functions/<schema>/<function>.sql, every overload of one function
// name, and sql/triggers/<schema>/<table>.sql, the triggers of one table, for the schemas in
// Schemas. A file is what a fresh install's catalog says (pg_get_functiondef, its COMMENT,
// its REVOKE/GRANT from proacl; pg_get_triggerdef). A function file keeps the leading `--`
// comment block it already had, so the prose a reviewer reads survives regeneration; a trigger
// file's header is generated (it names the trigger functions, whose files hold the prose).
// Names are ordered bytewise (COLLATE "C"), so the output does not depend on the cluster. Every file is literal
// SQL: applied to a database that has the same definitions (as outbox_owner) it changes nothing.
package sqldefs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Schemas are the kernel's schemas whose functions and triggers have definition files.
var Schemas = []string{"outbox", "inbox", "intake", "mailbox"}

// Dirs are the folders under sql/ that hold definition files.
var Dirs = []string{"functions", "triggers"}

// Header returns the leading comment block of a SQL file: its first lines that start with "--".
func Header(b []byte) string {
	var out strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && strings.HasPrefix(sc.Text(), "--") {
		out.WriteString(sc.Text())
		out.WriteByte('\n')
	}
	return out.String()
}

// Files reads the definition files under fsys (rooted at sql/): path relative to sql/ -> content.
func Files(fsys fs.FS) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, dir := range Dirs {
		err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && path.Ext(p) == ".sql" {
				b, err := fs.ReadFile(fsys, p)
				if err != nil {
					return err
				}
				out[p] = b
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return out, nil
}

// HeaderFunc returns the leading comment block to keep for the file at p ("" for none).
type HeaderFunc func(p string) string

// FileHeaders keeps the header each file under fsys has now.
func FileHeaders(fsys fs.FS) HeaderFunc {
	return func(p string) string {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return ""
		}
		return Header(b)
	}
}

type function struct {
	schema, name, kind, sig, def, comment string
	aclNull                               bool
	grants                                []string
}

type trigger struct {
	schema, table string
	name          string // "name ON schema.table", quoted where needed
	def           string
	constraint    bool
	fn            string
}

// Defs are the definition files of a database.
type Defs struct {
	// Files: path relative to sql/ -> content.
	Files map[string][]byte
	// Drops: path -> the statements that drop the objects of that file (a migration that
	// deletes the objects of a deleted file).
	Drops map[string][]string
}

// Render returns the definition files of the database behind conn (a fresh install). headers
// gives each file's leading comment block.
func Render(ctx context.Context, conn *pgx.Conn, headers HeaderFunc) (*Defs, error) {
	// Deparsed names and types depend on search_path: with only pg_catalog every kernel name is
	// schema-qualified, whatever the caller's settings.
	if _, err := conn.Exec(ctx, `SET search_path = pg_catalog, pg_temp`); err != nil {
		return nil, err
	}
	fns, err := functions(ctx, conn)
	if err != nil {
		return nil, err
	}
	trs, err := triggers(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := &Defs{Files: map[string][]byte{}, Drops: map[string][]string{}}
	bodies := map[string]*bytes.Buffer{}
	var order []string
	file := func(p string) *bytes.Buffer {
		b := bodies[p]
		if b == nil {
			b = &bytes.Buffer{}
			bodies[p] = b
			order = append(order, p)
		}
		return b
	}
	for _, f := range fns {
		b := file(FunctionPath(f.schema, f.name))
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		writeFunction(b, f)
		kw := "FUNCTION"
		if f.kind == "p" {
			kw = "PROCEDURE"
		}
		p := FunctionPath(f.schema, f.name)
		out.Drops[p] = append(out.Drops[p], fmt.Sprintf("DROP %s %s;", kw, f.sig))
	}
	byTable := map[string][]trigger{}
	for _, t := range trs {
		p := TriggerPath(t.schema, t.table)
		byTable[p] = append(byTable[p], t)
		b := file(p)
		out.Drops[p] = append(out.Drops[p], "DROP TRIGGER "+t.name+";")
		if t.constraint {
			// CREATE OR REPLACE does not take a constraint trigger
			fmt.Fprintf(b, "DROP TRIGGER IF EXISTS %s;\n", t.name)
			fmt.Fprintf(b, "%s;\n", t.def)
		} else {
			fmt.Fprintf(b, "%s;\n", strings.Replace(t.def, "CREATE TRIGGER ", "CREATE OR REPLACE TRIGGER ", 1))
		}
	}
	for _, p := range order {
		h := headers(p)
		if strings.HasPrefix(p, "triggers/") {
			// generated: the prose about a trigger lives in its function's file
			h = triggerHeader(byTable[p])
		}
		content := append([]byte(h), bodies[p].Bytes()...)
		if bytes.Contains(content, []byte("{{")) {
			// tern parses every .sql file below sql/ as a template (make migrate)
			return nil, fmt.Errorf("%s would contain {{, which tern cannot load from sql/", p)
		}
		out.Files[p] = content
	}
	return out, nil
}

// FunctionPath is the definition file of every overload of schema.name.
func FunctionPath(schema, name string) string { return "functions/" + schema + "/" + name + ".sql" }

// TriggerPath is the definition file of the triggers of schema.table.
func TriggerPath(schema, table string) string { return "triggers/" + schema + "/" + table + ".sql" }

func triggerHeader(ts []trigger) string {
	seen := map[string]bool{}
	var fns []string
	for _, t := range ts {
		if !seen[t.fn] {
			seen[t.fn] = true
			fns = append(fns, t.fn)
		}
	}
	sort.Strings(fns)
	var b strings.Builder
	fmt.Fprintf(&b, "-- The triggers of %s.%s. Their functions (sql/functions/<schema>/<function>.sql):\n", ts[0].schema, ts[0].table)
	for _, f := range fns {
		fmt.Fprintf(&b, "--   %s\n", f)
	}
	return b.String()
}

func writeFunction(b *bytes.Buffer, f function) {
	kw := "FUNCTION"
	if f.kind == "p" {
		kw = "PROCEDURE"
	}
	b.WriteString(strings.TrimRight(f.def, "\n"))
	b.WriteString(";\n")
	if f.comment != "" {
		fmt.Fprintf(b, "\nCOMMENT ON %s %s IS\n    %s;\n", kw, f.sig, f.comment)
	}
	if f.aclNull {
		return // PostgreSQL's default: EXECUTE to PUBLIC
	}
	b.WriteString("\n")
	public := false
	for _, g := range f.grants {
		if strings.HasPrefix(g, "PUBLIC") {
			public = true
		}
	}
	if !public {
		fmt.Fprintf(b, "REVOKE ALL ON %s %s FROM PUBLIC;\n", kw, f.sig)
	}
	for _, g := range f.grants {
		role, opt, _ := strings.Cut(g, " ")
		fmt.Fprintf(b, "GRANT EXECUTE ON %s %s TO %s%s;\n", kw, f.sig, role, opt)
	}
}

func functions(ctx context.Context, conn *pgx.Conn) ([]function, error) {
	rows, err := conn.Query(ctx, `
SELECT * FROM (
SELECT n.nspname, p.proname, p.prokind::text,
       pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
           coalesce((SELECT pg_catalog.string_agg(pg_catalog.format_type(t.typ, NULL), ', ' ORDER BY t.ord)
                       FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS t(typ, ord)), '')) AS sig,
       pg_catalog.pg_get_functiondef(p.oid),
       coalesce(pg_catalog.quote_literal(pg_catalog.obj_description(p.oid, 'pg_proc')), ''),
       p.proacl IS NULL,
       coalesce((SELECT pg_catalog.array_agg(g.grant ORDER BY g.grant COLLATE "C")
                   FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END
                                || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END AS grant
                           FROM pg_catalog.aclexplode(p.proacl) AS a
                           LEFT JOIN pg_catalog.pg_roles AS r ON r.oid = a.grantee
                          WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE') AS g), '{}')
  FROM pg_catalog.pg_proc AS p
  JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
 WHERE n.nspname = ANY ($1)
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS d
                    WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
) AS f
 ORDER BY f.nspname COLLATE "C", f.proname COLLATE "C", f.sig COLLATE "C"`, Schemas)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []function
	for rows.Next() {
		var f function
		if err := rows.Scan(&f.schema, &f.name, &f.kind, &f.sig, &f.def, &f.comment, &f.aclNull, &f.grants); err != nil {
			return nil, err
		}
		if f.kind != "f" && f.kind != "p" {
			return nil, fmt.Errorf("%s: prokind %q has no definition file (only functions and procedures)", f.sig, f.kind)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func triggers(ctx context.Context, conn *pgx.Conn) ([]trigger, error) {
	rows, err := conn.Query(ctx, `
SELECT n.nspname, c.relname, pg_catalog.format('%I ON %I.%I', t.tgname, n.nspname, c.relname),
       pg_catalog.pg_get_triggerdef(t.oid, true), t.tgconstraint <> 0,
       pg_catalog.format('%I.%I', fn.nspname, f.proname)
  FROM pg_catalog.pg_trigger AS t
  JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid
  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_proc AS f ON f.oid = t.tgfoid
  JOIN pg_catalog.pg_namespace AS fn ON fn.oid = f.pronamespace
 WHERE NOT t.tgisinternal AND n.nspname = ANY ($1)
 ORDER BY n.nspname COLLATE "C", c.relname COLLATE "C", t.tgname COLLATE "C"`, Schemas)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		var t trigger
		if err := rows.Scan(&t.schema, &t.table, &t.name, &t.def, &t.constraint, &t.fn); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Diff compares the rendered files (want) with the files on disk (got): the paths whose content
// differs, the rendered ones missing on disk, and the ones on disk that no object has, sorted.
func Diff(want, got map[string][]byte) (changed, missing, extra []string) {
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			missing = append(missing, p)
		case !bytes.Equal(w, g):
			changed = append(changed, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			extra = append(extra, p)
		}
	}
	sort.Strings(changed)
	sort.Strings(missing)
	sort.Strings(extra)
	return changed, missing, extra
}

// Change is what a new migration must do to make a fresh install's definitions those of the
// files on disk.
type Change struct {
	Apply []string            // changed or new files (sql/-relative), created in this order
	Files map[string][]byte   // their content on disk
	Drops map[string][]string // deleted files -> the statements dropping their objects
}

// Changes compares a fresh install's definitions with the files on disk.
func Changes(fresh *Defs, disk map[string][]byte) Change {
	changed, missing, extra := Diff(fresh.Files, disk)
	c := Change{Files: disk, Drops: map[string][]string{}}
	c.Apply = append(append(c.Apply, changed...), extra...)
	sort.Strings(c.Apply) // functions/ before triggers/: a trigger's function exists first
	for _, p := range missing {
		c.Drops[p] = fresh.Drops[p]
	}
	return c
}

// Empty reports whether nothing differs.
func (c Change) Empty() bool { return len(c.Apply) == 0 && len(c.Drops) == 0 }

// Migration writes the new migration file name (e.g. "041_foo.sql") for c: the drops of deleted
// files (triggers before functions), then the changed files' SQL, in one SET LOCAL ROLE
// outbox_owner ... RESET ROLE block, like every kernel migration. The developer edits it (a
// DROP FUNCTION where a signature changed, a DROP TRIGGER for a trigger taken out of a file)
// and commits it; it is never changed after that.
func Migration(name string, c Change) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "-- %s: TODO say what changes and why (R-ids, issue).\n", strings.TrimSuffix(name, ".sql"))
	b.WriteString("-- Written by make migration from the definition files that differ from a fresh install:\n")
	var all []string
	all = append(all, c.Apply...)
	for p := range c.Drops {
		all = append(all, p+" (deleted)")
	}
	sort.Strings(all)
	for _, p := range all {
		fmt.Fprintf(&b, "--   sql/%s\n", p)
	}
	b.WriteString("-- Review it: where a signature changed, DROP FUNCTION the old one first (CREATE OR REPLACE\n")
	b.WriteString("-- adds an overload); a trigger taken out of a file needs a DROP TRIGGER.\n")
	b.WriteString("SET LOCAL ROLE outbox_owner;\n")
	var dropPaths []string
	for p := range c.Drops {
		dropPaths = append(dropPaths, p)
	}
	// triggers/ before functions/: a trigger goes before the function it executes
	sort.Sort(sort.Reverse(sort.StringSlice(dropPaths)))
	for _, p := range dropPaths {
		fmt.Fprintf(&b, "\n-- sql/%s deleted\n", p)
		for _, s := range c.Drops[p] {
			b.WriteString(s + "\n")
		}
	}
	for _, p := range c.Apply {
		fmt.Fprintf(&b, "\n-- sql/%s\n", p)
		b.Write(bytes.TrimRight(c.Files[p], "\n"))
		b.WriteString("\n")
	}
	b.WriteString("\nRESET ROLE;\n")
	return b.Bytes()
}
