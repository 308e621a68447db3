package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
