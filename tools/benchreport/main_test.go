package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: Intel(R) Xeon(R) Processor
BenchmarkAppend-2   	     300	   7282363 ns/op	         2.80 hot_path_1_destination_ratio	      1525 hot_path_1_destination_µs/op
BenchmarkClaimLatency-2 	 1	 5 ns/op	 1.05 ratio_1e6/1e3
BenchmarkPipeline/backlog/1dest/batch100-2  1  9 ns/op  2500 events/s
PASS
`

// The report parses benchmark lines (names without the -GOMAXPROCS suffix, custom units) and
// marks each target met or missed against its limit.
func TestParseAndRender(t *testing.T) {
	res, cpu, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].name != "BenchmarkAppend" || cpu != "Intel(R) Xeon(R) Processor" {
		t.Fatalf("parsed %+v, cpu %q", res, cpu)
	}
	if v, ok := find(res, "BenchmarkAppend", "hot_path_1_destination_ratio"); !ok || v != 2.8 {
		t.Fatalf("find = %v %v", v, ok)
	}
	var b strings.Builder
	render(&b, res, cpu, nil, nil)
	out := b.String()
	for _, want := range []string{
		"| append hot path vs plain insert (1 destination) | ≤ 3.00 | 2.80 | met |",
		"| claim latency ratio backlog 10^6 / 10^3 | ≤ 1.50 | 1.05 | met |",
		"| P-3 dispatch of a pre-appended backlog to a consumer writing its receipt, 1 destination, batch 100 (events/s) | ≥ 3000 | 2500 | **missed** |",
		"| P-3 end to end with appends running concurrently, 1 destination (events/s) | ≥ 2000 | not measured | — |",
		"| WAL per delivered event, 1 KiB payload (bytes) | ≤ 4096 | not measured | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

const sbsSample = `# scripts/bench-river.sh 2026-12-01 10:00 UTC: n=5000 rounds=2 payload=400
MACHINE 2 cores, Intel(R) Xeon(R) Processor, load average 1.00 0.50 0.20 at start
bench-river: noise
RESULT river backlog jobs_per_sec=10000.0 jobs=5000 payload_bytes=400 river_version=v0.51.2 max_workers=2000 round=1
RESULT pgoutbox p1 deliveries_per_sec=1000.0 events_published_per_sec=1000.0 events=5000 workers=2 batch=100 ack=ack_delivery_per_item round=1
RESULT river concurrent jobs_per_sec=6000.0 jobs=5000 tx_size=100 round=1
RESULT pgoutbox p2 deliveries_per_sec=3000.0 events_published_per_sec=3000.0 events=5000 producers=2 tx_size=100 round=1
RESULT river backlog jobs_per_sec=6000.0 jobs=5000 round=2
RESULT pgoutbox p1 deliveries_per_sec=3000.0 events_published_per_sec=3000.0 events=5000 round=2
RESULT river concurrent jobs_per_sec=6000.0 jobs=5000 round=2
RESULT pgoutbox p2 deliveries_per_sec=9000.0 events_published_per_sec=9000.0 events=5000 round=2
MACHINE_END load average 2.00 1.00 0.50 at end
`

// The side-by-side section shows every round, the ratio of the means per obligation (P-1 0.25:
// missed; P-2 1.0: aim reached), River's version and N, and replaces only its own section of an
// existing report.
func TestSideBySide(t *testing.T) {
	s, err := parseSideBySide(strings.NewReader(sbsSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.results) != 8 || len(s.rounds()) != 2 || s.machine == "" || s.machineEnd == "" {
		t.Fatalf("parsed %+v", s)
	}
	var b strings.Builder
	renderSideBySide(&b, s, [][2]string{{"server_version", "15.18"}, {"fsync", "on"}, {"jit", "on"}})
	out := b.String()
	for _, want := range []string{
		sideBySideHeading + "\n",
		"River v0.51.2 ",
		"N = 5000 jobs / events per run, payload 400 bytes.",
		"Machine: 2 cores, Intel(R) Xeon(R) Processor, load average 1.00 0.50 0.20 at start, load average 2.00 1.00 0.50 at end.",
		"PostgreSQL: server_version 15.18, fsync on.",
		"| P-1 dispatch of a pre-appended backlog | 1 | 10000 worked jobs/s | 1000 deliveries/s | 1000 | 0.10 |",
		// P-7: median (min–max) per side, per-pair ratios, their median, BIMODAL when > 1.5x apart
		"| P-1 | 2 | 8000 (6000–10000) worked jobs/s | 2000 (1000–3000) | 0.10, 0.50 | **0.30** | ≥ 0.50 | 1.00 | **missed**; fewer than 3 pairs (P-7); **BIMODAL** (pairs 5.00× apart, pgoutbox runs 3.00× apart, River runs 1.67× apart) |",
		"| P-2 | 2 | 6000 (6000–6000) insert-and-work jobs/s | 6000 (3000–9000) | 0.50, 1.50 | **1.00** | ≥ 0.50 | 1.00 | met, aim reached; fewer than 3 pairs (P-7); **BIMODAL** (pairs 3.00× apart, pgoutbox runs 3.00× apart) |",
		"| P-6 | 0 | — | — | — | not measured in this run (modes `insertmany` / `p6` not available) | ≥ 0.25 | 0.50 | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	doc := "# Performance report\n\nintro\n\n## Targets\n\nt\n\n## Where the time goes\n\nnotes\n"
	once := replaceSection(doc, out)
	if !strings.Contains(once, "intro\n\n"+sideBySideHeading) || !strings.Contains(once, "**1.00** |") ||
		!strings.HasSuffix(once, "## Targets\n\nt\n\n## Where the time goes\n\nnotes\n") {
		t.Fatalf("insert:\n%s", once)
	}
	twice := replaceSection(once, sideBySideHeading+"\n\nnew\n\n")
	if strings.Count(twice, sideBySideHeading) != 1 || strings.Contains(twice, "**1.00**") ||
		!strings.Contains(twice, "intro\n\n"+sideBySideHeading+"\n\nnew\n\n## Targets\n") {
		t.Fatalf("replace:\n%s", twice)
	}
}

const p7Sample = `# scripts/bench-river.sh 2026-12-03 10:00 UTC: n=5000 rounds=3 payload=400
RESULT river backlog round=1 jobs_per_sec=10000.0 jobs=5000
RESULT pgoutbox p1 round=1 deliveries_per_sec=5000.0 events_published_per_sec=5000.0 wal_bytes_per_event=3000 claim_ms_p50=1.50 claim_full_calls=25 batch=100 payload_bytes=400
BUDGET pgoutbox p1 round=1 category=claim_call calls=50 total_ms=100.0 us_per_item=20.0 statements=1 within=-
BUDGET pgoutbox p1 round=1 category=per_item calls=5000 total_ms=50.0 us_per_item=10.0 statements=1 within=judge,append
STMT pgoutbox p1 round=1 rank=1 toplevel=true category=claim_call calls=50 total_ms=100.0 us_per_item=20.0 rows=5000 query=SELECT a | b FROM outbox.claim_deliveries($1)
FUNC pgoutbox p1 round=1 rank=1 name=outbox._ack_problem calls=5000 calls_per_item=1.00 total_ms=9.0 self_ms=8.0 us_per_item=1.6
RESULT river insertmany round=1 jobs_per_sec=50000.0 jobs=50000
RESULT pgoutbox p6 round=1 appended_per_sec=20000.0 events=50000
RESULT river backlog round=2 jobs_per_sec=11000.0
RESULT pgoutbox p1 round=2 deliveries_per_sec=6000.0 wal_bytes_per_event=5000 claim_ms_p50=2.50
BUDGET pgoutbox p1 round=2 category=claim_call calls=50 total_ms=150.0 us_per_item=30.0 statements=1 within=-
BUDGET pgoutbox p1 round=2 category=per_item calls=5000 total_ms=50.0 us_per_item=12.0 statements=1 within=judge,append
RESULT river insertmany round=2 jobs_per_sec=40000.0
RESULT pgoutbox p6 round=2 appended_per_sec=12000.0
RESULT river backlog round=3 jobs_per_sec=12000.0
RESULT pgoutbox p1 round=3 deliveries_per_sec=6500.0 wal_bytes_per_event=4000 claim_ms_p50=1.90
BUDGET pgoutbox p1 round=3 category=claim_call calls=50 total_ms=200.0 us_per_item=40.0 statements=1 within=-
RESULT river insertmany round=3 jobs_per_sec=45000.0
RESULT pgoutbox p6 round=3 appended_per_sec=13000.0
`

// P-7 over three pairs, P-6 when its lines are there, the WAL / claim latency table (P-4) and
// the per-statement budget (HP-6) with its top statements and per-item functions.
func TestSideBySideSpreadBudget(t *testing.T) {
	s, err := parseSideBySide(strings.NewReader(p7Sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.budget) != 5 || len(s.stmts) != 1 || len(s.funcs) != 1 || s.stmts[0].kv["query"] != "SELECT a | b FROM outbox.claim_deliveries($1)" {
		t.Fatalf("parsed budget %+v stmts %+v funcs %+v", s.budget, s.stmts, s.funcs)
	}
	var b strings.Builder
	renderSideBySide(&b, s, nil)
	out := b.String()
	for _, want := range []string{
		"| P-6 appends in transactions of 100 (append_events vs InsertMany) | 2 | 40000 inserted jobs/s | 12000 appended/s | — | 0.30 |",
		// ratios 0.50, 0.545, 0.542: median 0.54, not bimodal
		"| P-1 | 3 | 11000 (10000–12000) worked jobs/s | 6000 (5000–6500) | 0.50, 0.55, 0.54 | **0.54** | ≥ 0.50 | 1.00 | met |",
		// ratios 0.40, 0.30, 0.289: pgoutbox 20000 vs 12000 = 1.67x apart
		"| P-6 | 3 | 45000 (40000–50000) inserted jobs/s | 13000 (12000–20000) | 0.40, 0.30, 0.29 | **0.30** | ≥ 0.25 | 0.50 | met; **BIMODAL** (pgoutbox runs 1.67× apart) |",
		"### WAL per event and claim latency (P-4)",
		"| p1 | 2 | 5000 | 2.50 | ? |",
		"| p1 | 4000 (3000–5000) | met | 1.90 (1.50–2.50) | met |",
		"### Per-statement budget (HP-6)",
		"| claim_call | `claim_deliveries` calls (whole call) |  | 20.00 | 30.00 | 40.00 | 30.00 |",
		"| per_item | statements run once per item or more: inside functions called per item (HP-1: none on the success path) | judge, append | 10.00 | 12.00 | — | 11.00 |",
		"| `outbox._ack_problem` | 5000 | 1.00 **per item** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "Top statements of p1 round 1 by total time") || !strings.Contains(out, "`SELECT a \\| b FROM outbox.claim_deliveries($1)`") {
		t.Errorf("top statements of the last round that has them, query escaped:\n%s", out)
	}
	if strings.Contains(out, "| P-2 the same") || !strings.Contains(out, "| P-2 | 0 | — | — | — | not measured |") {
		t.Errorf("P-2 without lines: no rounds, not measured:\n%s", out)
	}
}

const plansSample = `SUMMARY BenchmarkPlanStability/autovacuum_off run1_events=1000 run2_events=10000 run1_dispatch_us=2066 run2_dispatch_us=5876 run1_append_us=1647 run2_append_us=1358 dispatch_ratio=2.84 path_ratio=1.95 tables_analyzed=0
PLAN BenchmarkPlanStability/autovacuum_off run2 statement 1
duration: 180.230 ms  plan:
Query Text: WITH ok AS (
  ->  Index Scan using outbox_deliveries_pkey on outbox_deliveries d
ENDPLAN
`

// HP-3: the plan-stability summary against 1.5 and run 2's plans, as their own section that
// benchreport -in "" -plans replaces in an existing report.
func TestPlans(t *testing.T) {
	ps, err := parsePlans(strings.NewReader(plansSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.summaries) != 1 || len(ps.plans) != 1 || !strings.Contains(ps.plans[0].text, "Index Scan using outbox_deliveries_pkey") {
		t.Fatalf("parsed %+v", ps)
	}
	var b strings.Builder
	renderPlans(&b, ps)
	out := b.String()
	for _, want := range []string{
		plansHeading + "\n",
		"| BenchmarkPlanStability/autovacuum_off | 1000 | 10000 | 2066 → 5876 | 1647 → 1358 | 2.84 | 1.95 | **missed** | 0 |",
		"<details><summary>BenchmarkPlanStability/autovacuum_off run2 statement 1</summary>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	doc := "# r\n\n## Targets\n\nt\n\n" + plansHeading + "\n\nold\n\n## Where the time goes\n\nn\n"
	got := replaceHeading(doc, plansHeading, out, "")
	if strings.Contains(got, "old") || !strings.Contains(got, "2066 → 5876") || !strings.HasSuffix(got, "## Where the time goes\n\nn\n") {
		t.Fatalf("replace:\n%s", got)
	}
}

const ceilingSample = `RESULT river backlog round=1 jobs_per_sec=10000.0
RESULT pgoutbox p1 round=1 deliveries_per_sec=3000.0 wal_bytes_per_event=4000 workers=2 batch=100
RESULT pgoutbox ceiling round=1 deliveries_per_sec=15000.0 wal_bytes_per_event=1100 workers=2 batch=100
RESULT river backlog round=2 jobs_per_sec=12000.0
RESULT pgoutbox p1 round=2 deliveries_per_sec=3600.0 wal_bytes_per_event=4100
RESULT pgoutbox ceiling round=2 deliveries_per_sec=12000.0 wal_bytes_per_event=1000
`

// P-8 (issue 35 item 1): the ceiling's rounds beside P-1 and River's backlog run, pgoutbox /
// ceiling beside pgoutbox / River; the ceiling stays out of the P-4 WAL / claim table.
func TestCeiling(t *testing.T) {
	s, err := parseSideBySide(strings.NewReader(ceilingSample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderSideBySide(&b, s, nil)
	out := b.String()
	for _, want := range []string{
		"### P-8: the write-set ceiling (same run)",
		"| 1 | 15000 | 3000 | 10000 | 0.20 | 0.30 | 0.67 | 1100 | 4000 |",
		"| 2 | 12000 | 3600 | 12000 | 0.30 | 0.30 | 1.00 | 1000 | 4100 |",
		"| 2 | 13500 (12000–15000) | **0.25** (0.20–0.30) | **0.30** (0.30–0.30) | **0.83** (0.67–1.00) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| ceiling | 1 |") {
		t.Errorf("the ceiling run is in the P-4 table:\n%s", out)
	}
	var none strings.Builder
	renderSideBySide(&none, mustParse(t, p7Sample), nil)
	if strings.Contains(none.String(), "P-8") {
		t.Errorf("a run without ceiling lines has a P-8 table")
	}
}

func mustParse(t *testing.T, in string) sideBySide {
	t.Helper()
	s, err := parseSideBySide(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const curveSample = `# scripts/bench-river.sh 2026-12-06 11:00 UTC: n=5000 rounds=2 payload=400 curve_n=2000 curve_rounds=2
RESULT river backlog jobs_per_sec=10000.0 jobs=5000 round=1
RESULT pgoutbox p1 deliveries_per_sec=5000.0 events_published_per_sec=5000.0 events=5000 workers=2 destinations=1 round=1
RESULT river backlog round=1 jobs_per_sec=2000.0 jobs=2000 pool_conns=1 jobs_per_event=1 max_workers=2000 label=curve
RESULT pgoutbox p1 round=1 deliveries_per_sec=1000.0 events_published_per_sec=1000.0 events=2000 workers=1 destinations=1 label=curve
RESULT river backlog round=1 jobs_per_sec=3000.0 jobs=2000 pool_conns=2 jobs_per_event=1 label=curve
RESULT pgoutbox p1 round=1 deliveries_per_sec=1800.0 events_published_per_sec=1800.0 events=2000 workers=2 destinations=1 label=curve
RESULT river backlog round=1 jobs_per_sec=3000.0 jobs=2000 pool_conns=4 jobs_per_event=1 label=curve
RESULT pgoutbox p1 round=1 deliveries_per_sec=2000.0 events_published_per_sec=2000.0 events=2000 workers=4 destinations=1 label=curve
RESULT river backlog round=1 jobs_per_sec=4000.0 jobs=8000 pool_conns=1 jobs_per_event=4 label=curve
RESULT pgoutbox p1 round=1 deliveries_per_sec=2000.0 events_published_per_sec=500.0 events=2000 workers=1 destinations=4 label=curve
RESULT river backlog round=2 jobs_per_sec=2000.0 jobs=2000 pool_conns=1 jobs_per_event=1 label=curve
RESULT pgoutbox p1 round=2 deliveries_per_sec=1500.0 events_published_per_sec=1500.0 events=2000 workers=1 destinations=1 label=curve
`

// The scale curve's label=curve lines stay out of the P-1 figures and fill the "Scale curve"
// table: one row per (connections, destinations), sorted by destinations then connections,
// the median (min–max) over the rounds, each side's speed-up against its own 1-connection
// median and the per-pair ratio (deliveries/s over jobs/s).
func TestScaleCurve(t *testing.T) {
	s, err := parseSideBySide(strings.NewReader(curveSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.results) != 2 || len(s.curve) != 10 {
		t.Fatalf("parsed %d results and %d curve lines, want 2 and 10", len(s.results), len(s.curve))
	}
	var b strings.Builder
	renderSideBySide(&b, s, nil)
	out := b.String()
	for _, want := range []string{
		// P-1 is the unlabelled pair only
		"| P-1 dispatch of a pre-appended backlog | 1 | 10000 worked jobs/s | 5000 deliveries/s | 5000 | 0.50 |",
		"### Scale curve: P-1 by connections and destinations (R-DP-9)\n",
		"backlog of 2000 events per run",
		"MaxWorkers 2000",
		"| connections | destinations | pairs | River jobs/s | River vs 1 conn | pgoutbox deliveries/s | pgoutbox events/s | pgoutbox vs 1 conn | pgoutbox / River |",
		"| 1 | 1 | 2 | 2000 (2000–2000) | 1.00× | 1250 (1000–1500) | 1250 (1000–1500) | 1.00× | **0.62** (0.50–0.75) |\n| 2 | 1 | 1 | 3000 | 1.50× | 1800 | 1800 | 1.44× | **0.60** |\n| 4 | 1 | 1 | 3000 | 1.50× | 2000 | 2000 | 1.60× | **0.67** |\n| 1 | 4 | 1 | 4000 | 1.00× | 2000 | 500 | 1.00× | **0.50** |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// without curve lines, no curve section
	s.curve = nil
	b.Reset()
	renderSideBySide(&b, s, nil)
	if strings.Contains(b.String(), "Scale curve") {
		t.Errorf("a run without curve lines renders a curve section:\n%s", b.String())
	}
}
