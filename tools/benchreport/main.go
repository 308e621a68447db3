// Command benchreport turns the output of `go test -bench` over ./bench (as `make bench` writes
// it to bench.out) into docs/performance.md: every benchmark's metrics, the PostgreSQL settings
// of the cluster it ran on, and the targets of the performance issue marked met or missed; with
// -river, the section "Side by side with River (same run)" from the RESULT lines that
// scripts/bench-river.sh collected (SPEC §12a P-1, P-2).
//
//	benchreport -in bench.out -river bench-river.out -out docs/performance.md -db URL
//	benchreport -in "" -river bench-river.out -out docs/performance.md -db URL   # that section only
//
// With -in "" the existing report is kept and only the side-by-side section (-river) and the
// plans section (-plans, BenchmarkPlanStability's PLAN_OUT file, HP-3) are replaced
// (`make bench-river`, `make bench-plans`).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

type metric struct {
	value float64
	unit  string
}

type result struct {
	name    string
	iters   string
	metrics []metric
}

func main() {
	in := flag.String("in", "bench.out", "go test -bench output")
	out := flag.String("out", "docs/performance.md", "report to write")
	db := flag.String("db", os.Getenv("DATABASE_URL"), "the cluster the benchmarks ran on (for its settings)")
	river := flag.String("river", "", "RESULT lines of scripts/bench-river.sh (side by side with River); empty: none")
	plansFile := flag.String("plans", "", "SUMMARY/PLAN lines of BenchmarkPlanStability (PLAN_OUT; HP-3); empty or missing: none")
	flag.Parse()
	var sbs *sideBySide
	if *river != "" {
		f, err := os.Open(*river)
		if err != nil {
			fatal(err)
		}
		s, err := parseSideBySide(f)
		f.Close()
		if err != nil {
			fatal(err)
		}
		sbs = &s
	}
	var plans *planSet
	if *plansFile != "" {
		if f, err := os.Open(*plansFile); err == nil {
			ps, err := parsePlans(f)
			f.Close()
			if err != nil {
				fatal(err)
			}
			plans = &ps
		} else if !os.IsNotExist(err) {
			fatal(err)
		}
	}
	settings := readSettings(*db)
	if *in == "" { // only the side-by-side and plans sections, into the existing report
		if sbs == nil && plans == nil {
			fatal(fmt.Errorf("nothing to do: -in, -river and -plans are all empty"))
		}
		old, err := os.ReadFile(*out)
		if err != nil && !os.IsNotExist(err) {
			fatal(err)
		}
		doc := string(old)
		if sbs != nil {
			var b strings.Builder
			renderSideBySide(&b, *sbs, settings)
			doc = replaceSection(doc, b.String())
		}
		if plans != nil {
			var b strings.Builder
			renderPlans(&b, *plans)
			doc = replaceHeading(doc, plansHeading, "\n"+strings.TrimLeft(b.String(), "\n"), "")
		}
		if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
			fatal(err)
		}
		fmt.Printf("wrote %s (side by side with River: %v, plans: %v)\n", *out, sbs != nil, plans != nil)
		return
	}
	f, err := os.Open(*in)
	if err != nil {
		fatal(err)
	}
	results, cpu, err := parse(f)
	f.Close()
	if err != nil {
		fatal(err)
	}
	var b strings.Builder
	render(&b, results, cpu, settings, sbs)
	if plans != nil {
		renderPlans(&b, *plans)
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fatal(err)
	}
	fmt.Printf("wrote %s (%d benchmarks)\n", *out, len(results))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(1)
}

func parse(r io.Reader) ([]result, string, error) {
	var out []result
	cpu := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "cpu:") {
			cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu:"))
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || len(fields)%2 != 0 {
			continue
		}
		res := result{name: trimProcs(fields[0]), iters: fields[1]}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			res.metrics = append(res.metrics, metric{v, fields[i+1]})
		}
		out = append(out, res)
	}
	return out, cpu, sc.Err()
}

func trimProcs(name string) string {
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func readSettings(dsn string) [][2]string {
	if dsn == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return [][2]string{{"(settings unavailable)", err.Error()}}
	}
	defer conn.Close(ctx)
	var out [][2]string
	for _, name := range []string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level",
		"shared_buffers", "max_wal_size", "checkpoint_timeout", "wal_buffers", "jit", "max_connections"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			v = "?"
		}
		out = append(out, [2]string{name, v})
	}
	return out
}

// find returns the value of unit in the first result whose name has prefix.
func find(results []result, prefix, unit string) (float64, bool) {
	for _, r := range results {
		if strings.HasPrefix(r.name, prefix) {
			for _, m := range r.metrics {
				if m.unit == unit {
					return m.value, true
				}
			}
		}
	}
	return 0, false
}

type target struct {
	what, bench, unit string
	limit             float64
	atLeast           bool
}

var targets = []target{
	{"append hot path vs plain insert (1 destination)", "BenchmarkAppend", "hot_path_1_destination_ratio", 3, false},
	{"claim latency ratio backlog 10^6 / 10^3", "BenchmarkClaimLatency", "ratio_1e6/1e3", 1.5, false},
	{"WAL per delivered event, 1 KiB payload (bytes)", "BenchmarkWriteAmplification", "WAL_bytes/event", 4096, false},
	{"HP-3 plan stability, autovacuum off: path µs/item run 2 / run 1 (plans cached on empty tables)", "BenchmarkPlanStability/autovacuum_off", "path_ratio_run2/run1", 1.5, false},
	{"HP-3 plan stability, autovacuum off: dispatch (claim + ack) µs/item run 2 / run 1", "BenchmarkPlanStability/autovacuum_off", "dispatch_ratio_run2/run1", 1.5, false},
	{"HP-3 plan stability, autovacuum on: path µs/item run 2 / run 1", "BenchmarkPlanStability/autovacuum_on", "path_ratio_run2/run1", 1.5, false},
	{"P-3 dispatch of a pre-appended backlog to a consumer writing its receipt, 1 destination, batch 100 (events/s)", "BenchmarkPipeline/backlog/1dest/batch100", "events/s", 3000, true},
	{"P-3 end to end with appends running concurrently, 1 destination (events/s)", "BenchmarkPipeline/concurrent_appends/1dest/batch100", "events/s", 2000, true},
	{"intake: accept_observations, calls of 100 new observations (obs/s; issue 22 item 7)", "BenchmarkAcceptObservations", "obs/s", 5000, true},
}

func render(b *strings.Builder, results []result, cpu string, settings [][2]string, sbs *sideBySide) {
	fmt.Fprintf(b, "# Performance report\n\n")
	fmt.Fprintf(b, "Generated by `make bench` (tools/benchreport) on %s. Machine: %d cores", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU())
	if cpu != "" {
		fmt.Fprintf(b, ", %s", cpu)
	}
	fmt.Fprintf(b, ". Numbers from one run; the machine is shared, so treat differences under ~20%% as noise.\n\n")
	if len(settings) > 0 {
		fmt.Fprintf(b, "## PostgreSQL settings\n\n| setting | value |\n|---|---|\n")
		for _, s := range settings {
			fmt.Fprintf(b, "| `%s` | %s |\n", s[0], s[1])
		}
		fmt.Fprintln(b)
	}
	if sbs != nil {
		renderSideBySide(b, *sbs, settings)
	}
	fmt.Fprintf(b, "## Targets\n\n| target | limit | measured | |\n|---|---|---|---|\n")
	for _, t := range targets {
		v, ok := find(results, t.bench, t.unit)
		cmp := "≤"
		if t.atLeast {
			cmp = "≥"
		}
		if !ok {
			fmt.Fprintf(b, "| %s | %s %s | not measured | — |\n", t.what, cmp, num(t.limit))
			continue
		}
		met := v <= t.limit
		if t.atLeast {
			met = v >= t.limit
		}
		mark := "met"
		if !met {
			mark = "**missed**"
		}
		fmt.Fprintf(b, "| %s | %s %s | %s | %s |\n", t.what, cmp, num(t.limit), num(v), mark)
	}
	fmt.Fprintf(b, "\n## All benchmarks\n\n| benchmark | iterations | metric | value |\n|---|---|---|---|\n")
	sort.SliceStable(results, func(i, j int) bool { return results[i].name < results[j].name })
	for _, r := range results {
		for i, m := range r.metrics {
			name, iters := r.name, r.iters
			if i > 0 {
				name, iters = "", ""
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, iters, m.unit, num(m.value))
		}
	}
	if notes, err := os.ReadFile("docs/performance-notes.md"); err == nil {
		fmt.Fprintf(b, "\n%s", notes)
	}
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
