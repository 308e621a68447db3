package main

// The "Side by side with River (same run)" section (SPEC §12a P-1, P-2): the RESULT lines that
// scripts/bench-river.sh collects from bench/river/cmd/riverbench and bench/outboxbench.

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// sideBySideHeading starts the section; benchreport -in "" replaces just this section.
const sideBySideHeading = "## Side by side with River (same run)"

type sbsResult struct {
	system, mode string
	round        int
	kv           map[string]string
}

func (r sbsResult) num(key string) (float64, bool) {
	v, err := strconv.ParseFloat(r.kv[key], 64)
	return v, err == nil
}

type sideBySide struct {
	header, machine, machineEnd string
	results                     []sbsResult
}

// parseSideBySide reads `# …` (run header), `MACHINE …`, `MACHINE_END …` and
// `RESULT <system> <mode> key=value …` lines; anything else is ignored.
func parseSideBySide(r io.Reader) (sideBySide, error) {
	var s sideBySide
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "# ") && s.header == "":
			s.header = strings.TrimPrefix(line, "# ")
		case strings.HasPrefix(line, "MACHINE_END "):
			s.machineEnd = strings.TrimPrefix(line, "MACHINE_END ")
		case strings.HasPrefix(line, "MACHINE "):
			s.machine = strings.TrimPrefix(line, "MACHINE ")
		case strings.HasPrefix(line, "RESULT "):
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			res := sbsResult{system: f[1], mode: f[2], kv: map[string]string{}}
			for _, p := range f[3:] {
				if k, v, ok := strings.Cut(p, "="); ok {
					res.kv[k] = v
				}
			}
			res.round, _ = strconv.Atoi(res.kv["round"])
			s.results = append(s.results, res)
		}
	}
	return s, sc.Err()
}

// comparison is one obligation: River's mode against pgoutbox's mode.
type comparison struct {
	id, what              string
	riverMode, outboxMode string
	riverUnit             string
	required, aim         float64
}

var comparisons = []comparison{
	{"P-1", "dispatch of a pre-appended backlog", "backlog", "p1", "worked jobs/s", 0.5, 1.0},
	{"P-2", "the same with producers appending in transactions of 100", "concurrent", "p2", "insert-and-work jobs/s", 0.5, 1.0},
}

func (s sideBySide) find(system, mode string, round int) (sbsResult, bool) {
	for _, r := range s.results {
		if r.system == system && r.mode == mode && r.round == round {
			return r, true
		}
	}
	return sbsResult{}, false
}

func (s sideBySide) rounds() []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range s.results {
		if !seen[r.round] {
			seen[r.round] = true
			out = append(out, r.round)
		}
	}
	sort.Ints(out)
	return out
}

// first returns the value of key in the first result of system that has it.
func (s sideBySide) first(system, key string) string {
	for _, r := range s.results {
		if v, ok := r.kv[key]; ok && r.system == system {
			return v
		}
	}
	return ""
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func renderSideBySide(b *strings.Builder, s sideBySide, settings [][2]string) {
	fmt.Fprintf(b, "%s\n\n", sideBySideHeading)
	if len(s.results) == 0 {
		fmt.Fprintf(b, "Not measured in this run (`make bench-river`).\n\n")
		return
	}
	rv := s.first("river", "river_version")
	if rv == "" {
		rv = "?"
	}
	fmt.Fprintf(b, "River %s (riverpgxv5 driver, schema by rivermigrate in a database of its own; module `bench/river`) and pgoutbox, alternating on the same cluster in one run (`scripts/bench-river.sh`: per round River backlog, pgoutbox P-1, River concurrent, pgoutbox P-2; every run in a freshly created database).", rv)
	if s.header != "" {
		fmt.Fprintf(b, " Run: %s.", s.header)
	}
	fmt.Fprintf(b, " N = %s jobs / events per run, payload %s bytes.", orQ(s.first("river", "jobs")), orQ(s.first("river", "payload_bytes")))
	if s.machine != "" {
		fmt.Fprintf(b, " Machine: %s", s.machine)
		if s.machineEnd != "" {
			fmt.Fprintf(b, ", %s", s.machineEnd)
		}
		fmt.Fprintf(b, ".")
	}
	var pg []string
	for _, kv := range settings {
		switch kv[0] {
		case "server_version", "fsync", "synchronous_commit", "shared_buffers":
			pg = append(pg, kv[0]+" "+kv[1])
		}
	}
	if len(pg) > 0 {
		fmt.Fprintf(b, " PostgreSQL: %s.", strings.Join(pg, ", "))
	}
	fmt.Fprintf(b, "\n\n| obligation | round | River | pgoutbox deliveries/s | pgoutbox events published/s | pgoutbox / River |\n|---|---|---|---|---|---|\n")
	var sums []summary
	for _, c := range comparisons {
		var rs, ds, ps []float64
		for _, round := range s.rounds() {
			rr, okR := s.find("river", c.riverMode, round)
			or, okO := s.find("pgoutbox", c.outboxMode, round)
			rj, _ := rr.num("jobs_per_sec")
			od, _ := or.num("deliveries_per_sec")
			op, _ := or.num("events_published_per_sec")
			cell := func(ok bool, v float64) string {
				if !ok {
					return "—"
				}
				return num(v)
			}
			ratio := "—"
			if okR && okO && rj > 0 {
				ratio = ratioText(od / rj)
			}
			fmt.Fprintf(b, "| %s %s | %d | %s %s | %s | %s | %s |\n", c.id, c.what, round, cell(okR, rj), c.riverUnit,
				cell(okO, od), cell(okO, op), ratio)
			if okR {
				rs = append(rs, rj)
			}
			if okO {
				ds, ps = append(ds, od), append(ps, op)
			}
		}
		sm := summary{c: c}
		if len(rs) > 0 && len(ds) > 0 && mean(rs) > 0 {
			sm.ratio, sm.ok = mean(ds)/mean(rs), true
			fmt.Fprintf(b, "| %s | mean | %s %s | %s | %s | **%s** |\n", c.id, num(mean(rs)), c.riverUnit, num(mean(ds)), num(mean(ps)), ratioText(sm.ratio))
		}
		sums = append(sums, sm)
	}
	fmt.Fprintf(b, "\n| obligation | pgoutbox / River (means) | required | aim | |\n|---|---|---|---|---|\n")
	for _, sm := range sums {
		if !sm.ok {
			fmt.Fprintf(b, "| %s | not measured | ≥ %s | %s | — |\n", sm.c.id, ratioText(sm.c.required), ratioText(sm.c.aim))
			continue
		}
		mark := "met"
		switch {
		case sm.ratio < sm.c.required:
			mark = "**missed**"
		case sm.ratio >= sm.c.aim:
			mark = "met, aim reached"
		}
		fmt.Fprintf(b, "| %s | %s | ≥ %s | %s | %s |\n", sm.c.id, ratioText(sm.ratio), ratioText(sm.c.required), ratioText(sm.c.aim), mark)
	}
	fmt.Fprintf(b, "\nHow each side was driven: River as in its own benchmark (cmd/river/riverbench): no-op worker, MaxWorkers %s, FetchCooldown %s, FetchPollInterval %s, pgxpool of %s connections, completions counted on the subscribe channel from client.Start to the last job; backlog inserted with InsertMany in batches of 5,000, concurrent producers with InsertManyTx in transactions of %s. pgoutbox through the public SQL API: %s worker connections as outbox_dispatcher, each looping claim_deliveries(batch %s) → receipt and ActiveConsumerAck@1 built in Go by the receipt package → ack (`%s`), one destination; events appended by the producer library (D-2 hot path) as outbox_producer in transactions of %s by %s producer connections.\n\n",
		orQ(s.first("river", "max_workers")), orQ(s.first("river", "fetch_cooldown")), orQ(s.first("river", "fetch_poll")),
		orQ(s.first("river", "pool_conns")), orQ(s.first("river", "tx_size")), orQ(s.first("pgoutbox", "workers")),
		orQ(s.first("pgoutbox", "batch")), orQ(s.first("pgoutbox", "ack")), orQ(s.first("pgoutbox", "tx_size")),
		orQ(s.first("pgoutbox", "producers")))
}

type summary struct {
	c     comparison
	ratio float64
	ok    bool
}

// ratioText renders a ratio with two decimals.
func ratioText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// replaceSection returns doc with the side-by-side section replaced by section (inserted before
// "## Targets", or appended, when doc has none).
func replaceSection(doc, section string) string {
	if i := strings.Index(doc, sideBySideHeading); i >= 0 {
		rest := doc[i+len(sideBySideHeading):]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			return doc[:i] + section + rest[j+1:]
		}
		return doc[:i] + section
	}
	if i := strings.Index(doc, "## Targets"); i >= 0 {
		return doc[:i] + section + doc[i:]
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + section
}
