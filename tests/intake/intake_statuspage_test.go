package intake

// The intake on the status page and in /metrics (SPEC R-OB-5, R-OP-4; issue 22 item 6): health
// per workload (degraded after a rejection or a reported send failure, unknown when nothing was
// heard), the newest observations without bodies, the observationId search, and gauges labelled
// by workload only.

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/readmodelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
)

func TestIntakeOnStatusPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 100000, MaxBodyBytes: 16384})
	srv := httptest.NewServer(&readmodel.Server{DB: b.Auditor, Gauges: readmodel.NewGauges()})
	t.Cleanup(srv.Close)

	ids := []string{testfix.NewUUID(), testfix.NewUUID()}
	secret := "do-not-show-" + testfix.NewUUID()[:8]
	sub := intakefix.Sub(ids[0])
	sub["body"].(map[string]any)["requestId"] = secret
	intakefix.Accept(t, b.EdgeA, intakefix.JSON(t, sub), intakefix.JSON(t, intakefix.Sub(ids[1])))
	bad := intakefix.Sub(testfix.NewUUID())
	bad["body"].(map[string]any)["unknownMember"] = 1
	intakefix.Want(t, intakefix.Accept(t, b.EdgeA, intakefix.JSON(t, bad))[0], "rejected", "OB702")
	now := time.Now()
	testfix.Must(t, pgcall.RecordSendFailures(ctx, b.EdgeA, 3, now.Add(-time.Minute), now, "queue_full"))

	code, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/status")
	if code != 200 {
		t.Fatalf("GET /status = %d:\n%s", code, page)
	}
	row := strings.ReplaceAll(readmodelfix.ConsoleElem(t, page, "intake-"+intakefix.WorkloadA), "\n", "")
	// workload, newest window, worst window, accepted 2, send failures 3, rejections 1
	if !strings.HasPrefix(row, intakefix.WorkloadA+"degradeddegraded231") {
		t.Errorf("intake row of A %q, want degraded with 2 accepted, 3 send failures, 1 rejection", row)
	}
	if rowB := strings.ReplaceAll(readmodelfix.ConsoleElem(t, page, "intake-"+intakefix.WorkloadB), "\n", ""); !strings.HasPrefix(rowB, intakefix.WorkloadB+"unknownunknown000") {
		t.Errorf("intake row of B (nothing heard) %q, want unknown", rowB)
	}
	for _, id := range ids {
		if !strings.Contains(page, id) {
			t.Errorf("recent observation %s not listed", id)
		}
	}
	if strings.Contains(page, secret) {
		t.Errorf("the status page shows an observation body")
	}

	code, page = readmodelfix.ConsoleGet(t, nil, srv.URL+"/status?kind=observationId&id="+ids[0])
	if code != 200 || !strings.Contains(page, `<td class="result">matched</td><td class="reason">positive_match_only</td>`) {
		t.Errorf("observationId search on the page: %d\n%s", code, page)
	}

	code, metrics := readmodelfix.ConsoleGet(t, nil, srv.URL+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`pgoutbox_intake_accepted_last_hour{workload="` + intakefix.WorkloadA + `"} 2`,
		`pgoutbox_intake_rejections_last_hour{workload="` + intakefix.WorkloadA + `"} 1`,
		`pgoutbox_intake_send_failures_last_hour{workload="` + intakefix.WorkloadA + `"} 3`,
		`pgoutbox_intake_degraded{workload="` + intakefix.WorkloadA + `"} 1`,
		`pgoutbox_intake_degraded{workload="` + intakefix.WorkloadB + `"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, id := range ids {
		if strings.Contains(metrics, id) {
			t.Errorf("an observation id is a metric label")
		}
	}

	if _, err := pgcall.ConsoleObservations(ctx, b.Auditor, 0); pgcall.SQLState(err) != "22023" {
		t.Errorf("limit 0: %v, want 22023", err)
	}
	if _, err := pgcall.ConsoleObservations(ctx, b.EdgeA, 10); pgcall.SQLState(err) != "42501" {
		t.Errorf("a workload reading the console list: %v, want 42501", err)
	}
}
