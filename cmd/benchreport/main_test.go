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
		"| P-1 dispatch of a pre-appended backlog | 1 | 10000 worked jobs/s | 1000 | 1000 | 0.10 |",
		"| P-1 | mean | 8000 worked jobs/s | 2000 | 2000 | **0.25** |",
		"| P-2 | mean | 6000 insert-and-work jobs/s | 6000 | 6000 | **1.00** |",
		"| P-1 | 0.25 | ≥ 0.50 | 1.00 | **missed** |",
		"| P-2 | 1.00 | ≥ 0.50 | 1.00 | met, aim reached |",
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
