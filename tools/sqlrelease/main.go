// Command sqlrelease cuts a release of the kernel's migrations (docs/migrations.md): it renders
// the migrations -from..-to of sql/ once with tern's own loader (LoadMigrations, the code path
// `make migrate` runs), writes each rendered UpSQL back over its file, and appends their sha256
// to sql/released.sha256 under the release's name, where TestUpgradeReleasedMigrationsUnchanged
// pins them. A migration that is already literal SQL renders to itself, so cutting a later
// release only pins it.
//
//	go run ./tools/sqlrelease -release r3 -from 41 -to 48
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/tern/v2/migrate"
)

func main() {
	dir := flag.String("dir", "sql", "the migrations folder")
	release := flag.String("release", "", "the release's name, e.g. r3")
	from := flag.Int("from", 0, "its first migration's number")
	to := flag.Int("to", 0, "its last migration's number")
	flag.Parse()
	if *release == "" || *from < 1 || *to < *from {
		log.Fatal("usage: sqlrelease -release rN -from FIRST -to LAST [-dir sql]")
	}
	if err := run(*dir, *release, *from, *to); err != nil {
		log.Fatal(err)
	}
}

func run(dir, release string, from, to int) error {
	manifest := filepath.Join(dir, "released.sha256")
	pinned, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	m, err := migrate.NewMigratorEx(context.Background(), nil, "public.schema_version", &migrate.MigratorOptions{})
	if err != nil {
		return err
	}
	if err := m.LoadMigrations(os.DirFS(dir)); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if to > len(m.Migrations) {
		return fmt.Errorf("%s has %d migrations, not %d", dir, len(m.Migrations), to)
	}
	var lines strings.Builder
	fmt.Fprintf(&lines, "# release %s = migrations %03d..%03d, rendered once by tools/sqlrelease\n", release, from, to)
	for _, mig := range m.Migrations[from-1 : to] {
		if strings.Contains(string(pinned), "  "+mig.Name+"\n") {
			return fmt.Errorf("%s is already released", mig.Name)
		}
		body := []byte(mig.UpSQL + "\n")
		if strings.Contains(mig.UpSQL, "{{") {
			return fmt.Errorf("%s still contains {{ after rendering", mig.Name)
		}
		if err := os.WriteFile(filepath.Join(dir, mig.Name), body, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&lines, "%s  %s\n", hex.EncodeToString(sum[:]), mig.Name)
	}
	f, err := os.OpenFile(manifest, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(lines.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
