package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// R-DS-4, R-DS-5, R-SEC-4: outboxctl registers (computing the digest itself), activates and
// lists releases as outbox_registrar / outbox_auditor, and prints the audit.
func TestReleaseCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	var out bytes.Buffer
	if err := run(ctx, dsn, []string{"release", "register-reference"}, &out); err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(out.String())
	if len(fields) != 5 || fields[0] != "registered" || fields[1] != "1" || len(fields[4]) != 64 {
		t.Fatalf("register output %q", out.String())
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"release", "activate", "1", "1", "jcs-sha256-v1", fields[4]}, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"release", "list"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), fields[4]+"  active") || !strings.Contains(out.String(), "oceanway-first-release") {
		t.Fatalf("list output:\n%s", out.String())
	}
	// A release file with a hand-written digest is refused before it reaches the database.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"deliverySetDefinitionDigest":"00"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, dsn, []string{"release", "register", bad}, &out); err == nil || !strings.Contains(err.Error(), "carries deliverySetDefinitionDigest") {
		t.Fatalf("file with a digest: %v", err)
	}
	// A wrong quartet is the database's OB101.
	if err := run(ctx, dsn, []string{"release", "activate", "1", "1", "jcs-sha256-v1", strings.Repeat("0", 64)}, &out); !errors.Is(err, pgcall.ErrDefinitionInvalid) {
		t.Fatalf("activate unknown quartet: %v", err)
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"audit"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "# grant matrix") || !strings.Contains(out.String(), "tg_outbox_events__delivery_set_complete") {
		t.Fatalf("audit output lacks the matrix or the triggers")
	}
	if err := run(ctx, dsn, []string{"release", "frobnicate"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("bad usage: %v", err)
	}
}

// R-OB-1, issue 22 item 4: the reference observation schemas and projector are registered from
// the reference release (the kernel's migrations carry none); registering again is a no-op with
// the same digests.
func TestReleaseRegisterObservations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	var before int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM intake.observation_schemas`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before != 0 {
		t.Fatalf("a migrated kernel has %d observation schemas, want none", before)
	}
	var out, again bytes.Buffer
	if err := run(ctx, dsn, []string{"release", "register-observations"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"observation schema request_attempt@1 ", "observation schema error_occurrence@1 ",
		"observation projector observation_projector observation_log@1"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(ctx, dsn, []string{"release", "register-observations"}, &again); err != nil {
		t.Fatal(err)
	}
	if again.String() != out.String() {
		t.Fatalf("second registration differs:\n%s\nvs\n%s", again.String(), out.String())
	}
	var schemas, projectors int
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM intake.observation_schemas), (SELECT count(*) FROM intake.observation_projectors)`).Scan(&schemas, &projectors); err != nil {
		t.Fatal(err)
	}
	if schemas != 2 || projectors != 1 {
		t.Fatalf("%d schemas, %d projectors registered", schemas, projectors)
	}
}

// Issue 34 item 4, R-DS-4, R-DS-5: `release activate FILE [SOURCE_RELEASE]` registers a user's
// own release document (digest computed here) and activates it in one command; running it
// again is a no-op with the same quartet. The example's receipt kinds and destinations come
// first (examples/orders/register.sql, public SQL functions only).
func TestReleaseActivateFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	sql, err := os.ReadFile("../../examples/orders/register.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testdb.Conn(t, dsn, "").Exec(ctx, string(sql)); err != nil {
		t.Fatalf("register.sql: %v", err)
	}
	const file = "../../examples/orders/release.json"
	var out, again bytes.Buffer
	if err := run(ctx, dsn, []string{"release", "activate", file, "orders-first-release"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "registered 1 1 jcs-sha256-v1 ") ||
		strings.TrimPrefix(lines[1], "activated") != strings.TrimPrefix(lines[0], "registered") {
		t.Fatalf("release activate FILE said:\n%s", out.String())
	}
	if err := run(ctx, dsn, []string{"release", "activate", file, "orders-first-release"}, &again); err != nil || again.String() != out.String() {
		t.Fatalf("second activation: %v\n%s", err, again.String())
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"release", "list"}, &out); err != nil {
		t.Fatal(err)
	}
	digest := strings.Fields(lines[0])[4]
	if !strings.Contains(out.String(), digest+"  active") || !strings.Contains(out.String(), "orders-first-release") {
		t.Fatalf("list output:\n%s", out.String())
	}
	// The same version with another definition is the database's OB102, and nothing changes.
	changed := filepath.Join(t.TempDir(), "changed.json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, []byte(strings.Replace(string(b), `"mandatory": true`, `"mandatory": false`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, dsn, []string{"release", "activate", changed}, &out); !errors.Is(err, pgcall.ErrVersionConflict) {
		t.Fatalf("another definition under version 1: %v, want OB102", err)
	}
	auditor := testdb.Conn(t, dsn, "outbox_auditor")
	sets, err := pgcall.ListDeliverySets(ctx, auditor)
	if err != nil || len(sets) != 1 || sets[0].DefinitionDigest != digest || sets[0].Status != "active" {
		t.Fatalf("delivery sets after the refused one: %v %+v", err, sets)
	}
	if err := run(ctx, dsn, []string{"release", "activate", file, "a", "b"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("three arguments: %v, want usage", err)
	}
}
