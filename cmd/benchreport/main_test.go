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
	render(&b, res, cpu, nil)
	out := b.String()
	for _, want := range []string{
		"| append hot path vs plain insert (1 destination) | ≤ 3.00 | 2.80 | met |",
		"| claim latency ratio backlog 10^6 / 10^3 | ≤ 1.50 | 1.05 | met |",
		"| dispatch of a pre-appended backlog to a consumer writing its receipt, 1 destination, batch 100 (events/s) | ≥ 15000 | 2500 | **missed** |",
		"| end to end with appends running concurrently, 1 destination (events/s) | ≥ 7500 | not measured | — |",
		"| WAL per delivered event, 1 KiB payload (bytes) | ≤ 4096 | not measured | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
