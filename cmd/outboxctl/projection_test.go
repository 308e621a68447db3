package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
)

// R-PV-1, R-PV-4, R-PV-5: outboxctl registers projection versions and their content rows,
// starts a shadow build, prints digests and comparisons, and lists the versions; the status
// page and /metrics show them (no build token anywhere).
func TestProjectionCommandsAndPanel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	if _, err := admin.Exec(ctx, `CREATE SCHEMA pc_v1; CREATE SCHEMA pc_v2;
		CREATE VIEW pc_v1.rows AS SELECT 'a'::text AS row_key, '{"n":1}'::jsonb AS row_document;
		CREATE VIEW pc_v2.rows AS SELECT 'a'::text AS row_key, '{"n":2}'::jsonb AS row_document;
		GRANT USAGE ON SCHEMA pc_v1, pc_v2 TO outbox_owner; GRANT SELECT ON pc_v1.rows, pc_v2.rows TO outbox_owner`); err != nil {
		t.Fatal(err)
	}
	do := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, dsn, args, &out); err != nil {
			t.Fatalf("outboxctl %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	if got := do("projection", "register", "pc_projection", "1", "unknown"); got != "registered pc_projection@1\n" {
		t.Fatalf("register v1: %q", got)
	}
	do("projection", "register", "pc_projection", "2", strings.Repeat("ab", 32))
	do("projection", "rows", "pc_projection", "1", "pc_v1.rows")
	do("projection", "rows", "pc_projection", "2", "pc_v2.rows")
	build := do("projection", "build", "pc_projection", "2")
	if !strings.HasPrefix(build, "build ") || !strings.Contains(build, "token ") {
		t.Fatalf("build output %q", build)
	}
	token := strings.Fields(strings.Split(build, "\n")[1])[1]
	if d := do("projection", "digest", "pc_projection", "1"); len(strings.Fields(d)) != 2 || len(strings.Fields(d)[1]) != 64 {
		t.Fatalf("digest output %q", d)
	}
	cmp := do("projection", "compare", "pc_projection", "1", "2")
	if !strings.HasPrefix(cmp, "same false\n") || !strings.Contains(cmp, "differing keys (first 1): a") {
		t.Fatalf("compare output %q", cmp)
	}
	list := do("projection", "list")
	for _, want := range []string{"pc_projection  1        active", "pc_projection  2        shadow", "pc_v2.rows", "building"} {
		if !strings.Contains(list, want) {
			t.Fatalf("list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, token) {
		t.Fatalf("the list shows a build token")
	}
	var out bytes.Buffer
	if err := run(ctx, dsn, []string{"projection", "register", "pc_projection", "0", "unknown"}, &out); err == nil {
		t.Fatal("version 0 accepted")
	}

	// the cutover runbook's commands on the reference projection (routed by the active set)
	testfix.ActivateReference(t, admin)
	do("projection", "register", "operations_timeline", "2", "unknown")
	ob := strings.Split(do("projection", "build", "operations_timeline", "2"), "\n")
	buildID, obToken := strings.Fields(ob[0])[1], strings.Fields(ob[1])[1]
	if p := do("projection", "progress", buildID); !strings.HasPrefix(p, "[") || !strings.Contains(p, " building built ") {
		t.Fatalf("progress output %q", p)
	}
	frozen := do("projection", "freeze", buildID, obToken)
	lines := strings.Split(frozen, "\n")
	if !strings.HasPrefix(lines[0], "boundary ") || !strings.HasPrefix(lines[1], "token ") || strings.Fields(lines[1])[1] == obToken {
		t.Fatalf("freeze output %q", frozen)
	}
	if doc := do("projection", "boundary", strings.Fields(lines[0])[1]); !strings.Contains(doc, `"documentType":"CutoverCandidateBoundary@1"`) {
		t.Fatalf("boundary document %q", doc)
	}
	if out := do("projection", "pause", "core_operations", "cutover drill"); out != "paused claims of core_operations\n" {
		t.Fatalf("pause output %q", out)
	}
	do("projection", "resume", "core_operations")
	if err := run(ctx, dsn, []string{"projection", "retire", "operations_timeline", "1"}, &out); err == nil {
		t.Fatal("the active version was retired")
	}
	if got := do("projection", "retire", "operations_timeline", "2"); got != "retired operations_timeline@2\n" {
		t.Fatalf("retire output %q", got)
	}
	if got := do("projection", "drop", "operations_timeline", "2"); !strings.HasPrefix(got, "dropped 0 rows of operations_timeline@2") {
		t.Fatalf("drop output %q", got)
	}

	aud := testdb.Conn(t, dsn, "outbox_auditor")
	srv := httptest.NewServer(&readmodel.Server{DB: aud, Gauges: readmodel.NewGauges()})
	defer srv.Close()
	page := get(t, srv.URL+"/status")
	for _, want := range []string{`id="pv-pc_projection-1"`, `<td class="pv-progress">building: 0 built, 0 to go`, `<td class="pv-state">active</td>`, `<td class="pv-state">shadow</td>`, `<td class="pv-state">retired</td>`, "pc_v1.rows"} {
		if !strings.Contains(page, want) {
			t.Fatalf("status page lacks %s", want)
		}
	}
	if strings.Contains(page, token) {
		t.Fatalf("the status page shows a build token")
	}
	metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{`pgoutbox_projection_version_state{projection="pc_projection",state="active",version="1"} 1`,
		`pgoutbox_projection_version_state{projection="pc_projection",state="shadow",version="2"} 1`,
		`pgoutbox_projection_version_state{projection="operations_timeline",state="retired",version="2"} 1`,
		`pgoutbox_projection_build_sources{projection="pc_projection",version="2"} 0`,
		`pgoutbox_projection_build_remaining{projection="pc_projection",state="building",version="2"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return string(b)
}

// R-PV-3, T-10: `outboxctl projection rollback` returns to the frozen former version by the same
// protocol (rollback build, hand-out, freeze, cutover_projection with the old set's quartet):
// after a forward cutover driven by the runbook's commands, a rollback to the active version,
// to an unregistered one, or with a delivery set that does not target the frozen version changes
// nothing; the right quartet switches back with a readiness proof of direction rollback.
func TestProjectionRollbackCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	q1 := testfix.ActivateReference(t, admin)
	q2 := testfix.RegisterRetargetedReference(t, admin, 2, "operations_timeline", 2)
	do := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(ctx, dsn, args, &out)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := do(args...)
		if err != nil {
			t.Fatalf("outboxctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	quartet := func(q pgcall.Quartet) []string {
		return []string{strconv.Itoa(q.DeliverySetVersion), strconv.Itoa(q.DefinitionSchemaVersion), q.DigestAlgorithmVersion, q.DefinitionDigest}
	}
	state := func() string {
		t.Helper()
		var s string
		if err := admin.QueryRow(ctx, `SELECT string_agg(projection_version || ':' || state, ' ' ORDER BY projection_version)
			|| ' set=' || (SELECT delivery_set_version FROM outbox.delivery_set_versions WHERE status = 'active')
			|| ' proofs=' || (SELECT count(*) FROM outbox.cutover_readiness_proofs)
			FROM outbox.projection_versions WHERE projection_name = 'operations_timeline'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// the projector's inbox is this database: its consumer is bound here (else OB810, R-PV-2)
	if _, err := admin.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgoutbox_test_ctl_projector') THEN
			CREATE ROLE pgoutbox_test_ctl_projector NOLOGIN IN ROLE outbox_consumer;
		END IF;
	EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.BindConsumerRole(ctx, admin, "operations_projector", "pgoutbox_test_ctl_projector"); err != nil {
		t.Fatal(err)
	}

	// forward: no event yet, so the shadow is complete at once
	must("projection", "register", "operations_timeline", "2", "unknown")
	if out, err := do(append([]string{"projection", "rollback", "operations_timeline", "2"}, quartet(q2)...)...); err == nil ||
		!strings.Contains(err.Error(), "is shadow") {
		t.Fatalf("rollback to a shadow: %v %q, want a refusal", err, out)
	}
	b := strings.Split(must("projection", "build", "operations_timeline", "2"), "\n")
	buildID, token := strings.Fields(b[0])[1], strings.Fields(b[1])[1]
	fz := strings.Split(must("projection", "freeze", buildID, token), "\n")
	token = strings.Fields(fz[1])[1]
	if out := must(append([]string{"projection", "cutover", buildID, token}, quartet(q2)...)...); !strings.HasPrefix(out, "switched proof ") {
		t.Fatalf("cutover output %q", out)
	}
	if got := state(); got != "1:frozen 2:active set=2 proofs=1" {
		t.Fatalf("after the cutover: %s", got)
	}

	// refusals: nothing changes
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"projection", "rollback", "operations_timeline", "2"}, quartet(q1)...), "is active"},
		{append([]string{"projection", "rollback", "operations_timeline", "7"}, quartet(q1)...), "not registered"},
		{append([]string{"projection", "rollback", "operations_timeline", "1"}, quartet(q2)...), "22023"},
		{[]string{"projection", "rollback", "operations_timeline", "1", "x", "1", "jcs-sha256-v1", "d"}, "bad usage"},
	} {
		out, err := do(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("outboxctl %s: %v %q, want an error naming %q", strings.Join(c.args, " "), err, out, c.want)
		}
		if got := state(); got != "1:frozen 2:active set=2 proofs=1" {
			t.Fatalf("a refused rollback (%s) changed state: %s", c.want, got)
		}
	}

	out := must(append([]string{"projection", "rollback", "operations_timeline", "1"}, quartet(q1)...)...)
	lines := strings.Split(out, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "rollback build ") || !strings.HasPrefix(lines[1], "boundary ") ||
		!strings.HasPrefix(lines[3], "switched proof ") {
		t.Fatalf("rollback output %q", out)
	}
	if got := state(); got != "1:active 2:frozen set=1 proofs=2" {
		t.Fatalf("after the rollback: %s", got)
	}
	proof := must("projection", "proof", strings.Fields(lines[3])[2])
	for _, want := range []string{`"direction":"rollback"`, `"fromVersion":2`, `"toVersion":1`, `"result":"Switched"`} {
		if !strings.Contains(proof, want) {
			t.Fatalf("rollback proof lacks %s: %s", want, proof)
		}
	}
	// the rollback build is terminal: its token is dead
	rbBuild, rbToken := strings.Fields(lines[0])[2], strings.Fields(lines[2])[1]
	if _, err := do(append([]string{"projection", "cutover", rbBuild, rbToken}, quartet(q1)...)...); err == nil || !strings.Contains(err.Error(), "OB001") {
		t.Fatalf("cutover with the switched rollback build's token: %v, want OB001", err)
	}
}
