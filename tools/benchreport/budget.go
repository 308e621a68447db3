package main

// The subsections of "Side by side with River" that come from outboxbench's own lines: WAL per
// event and claim latency of every run (P-4), and the per-statement budget from
// pg_stat_statements / pg_stat_user_functions (SPEC §12a HP-6).

import (
	"fmt"
	"strings"
)

// budgetCategories: the BUDGET categories of bench/outboxbench in report order, with what each
// holds (outboxbench/budget.go classifies the statements).
var budgetCategories = []struct{ name, what string }{
	{"claim_call", "`claim_deliveries` calls (whole call)"},
	{"claim", "claiming statement (with its attempt-start insert CTE), recovery probe, argument checks"},
	{"ack_call", "`ack_deliveries` calls (whole call)"},
	{"judge", "item parsing, lock in key order, the R-AK-2 judging statement (with the functions it calls)"},
	{"per_item", "statements run once per item or more: inside functions called per item (HP-1: none on the success path)"},
	{"ack_update", "update of the acknowledged deliveries (with the finish insert CTE)"},
	{"attempt_rows", "attempt starts / finishes inserted by statements of their own"},
	{"attempt_fk", "foreign-key checks of attempt starts and finishes"},
	{"publication", "publication insert, its guards and trigger"},
	{"append_call", "`append_events` calls (whole call)"},
	{"append", "inside `append_events` and the deferred delivery-set check at commit"},
	{"other", "everything else"},
}

func (s sideBySide) modes(rs []sbsResult) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		if r.system == "pgoutbox" && !seen[r.mode] {
			seen[r.mode] = true
			out = append(out, r.mode)
		}
	}
	return out
}

func (s sideBySide) roundsOf(rs []sbsResult, mode string) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rs {
		if r.mode == mode && !seen[r.round] {
			seen[r.round] = true
			out = append(out, r.round)
		}
	}
	return out
}

func renderLatencyWAL(b *strings.Builder, s sideBySide) {
	type row struct {
		mode  string
		round int
		wal   float64
		claim float64
		full  string
	}
	var rows []row
	for _, r := range s.results {
		if r.system != "pgoutbox" || r.mode == "ceiling" { // the ceiling has its own table (P-8)
			continue
		}
		w, okW := r.num("wal_bytes_per_event")
		c, okC := r.num("claim_ms_p50")
		if !okW && !okC {
			continue
		}
		rows = append(rows, row{r.mode, r.round, w, c, orQ(r.kv["claim_full_calls"])})
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### WAL per event and claim latency (P-4)\n\n")
	fmt.Fprintf(b, "From the same pgoutbox runs: WAL written during the measured phase (`pg_wal_lsn_diff` of `pg_current_wal_lsn()` before and after; P-1: dispatch only, P-2: appends and dispatch) per event, and the median wall time in Go of a `claim_deliveries` call that returned a full batch of %s. Payload %s bytes (P-4's WAL limit is stated for 1 KiB).\n\n",
		orQ(s.first("pgoutbox", "batch")), orQ(s.first("pgoutbox", "payload_bytes")))
	fmt.Fprintf(b, "| run | round | WAL bytes / event | claim of %s, median ms | full claims |\n|---|---|---|---|---|\n", orQ(s.first("pgoutbox", "batch")))
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", r.mode, r.round, num(r.wal), num(r.claim), r.full)
	}
	fmt.Fprintf(b, "\n| run | WAL bytes / event, median (min–max) | ≤ 4096 | claim median ms, median (min–max) | ≤ 2 ms |\n|---|---|---|---|---|\n")
	for _, mode := range s.modes(s.results) {
		var ws, cs []float64
		for _, r := range rows {
			if r.mode == mode {
				ws, cs = append(ws, r.wal), append(cs, r.claim)
			}
		}
		if len(ws) == 0 {
			continue
		}
		w, c := spreadOf(ws), spreadOf(cs)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mode, w.text(), metText(w.median <= 4096), c.text(), metText(c.median <= 2))
	}
	fmt.Fprintln(b)
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// mdCode renders text as inline code inside a table cell.
func mdCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "|", `\|`).Replace(s) + "`"
}

func renderBudget(b *strings.Builder, s sideBySide) {
	if len(s.budget) == 0 {
		return
	}
	fmt.Fprintf(b, "### Per-statement budget (HP-6)\n\n")
	fmt.Fprintf(b, "From `pg_stat_statements` (`track = all`: the statements inside the PL/pgSQL functions and triggers are counted at their own nesting level; reset at the start of each run's measured phase) and `pg_stat_user_functions` (`track_functions = all`), in the same runs as above. µs per item = total execution time / events delivered in the run (P-2 appends divided by the same count). A statement's time includes everything it calls, so the categories overlap along the nesting: *within* names the categories that already contain a row's time; the `*_call` rows are the whole calls. Statements are classified by their query text (bench/outboxbench/budget.go).\n\n")
	for _, mode := range s.modes(s.budget) {
		rounds := s.roundsOf(s.budget, mode)
		if unavailable := s.budgetKV(mode, rounds[0], "unavailable"); unavailable != "" {
			fmt.Fprintf(b, "%s: not measured (%s).\n\n", mode, strings.ReplaceAll(s.budgetKV(mode, rounds[0], "note"), "_", " "))
			continue
		}
		fmt.Fprintf(b, "**%s**, µs per delivered item:\n\n| category | what | within |", mode)
		for _, r := range rounds {
			fmt.Fprintf(b, " round %d |", r)
		}
		fmt.Fprintf(b, " median |\n|---|---|---|%s---|\n", strings.Repeat("---|", len(rounds)))
		for _, c := range budgetCategories {
			var xs []float64
			cells := make([]string, len(rounds))
			any := false
			for i, r := range rounds {
				cells[i] = "—"
				for _, l := range s.budget {
					if l.mode == mode && l.round == r && l.kv["category"] == c.name {
						if v, ok := l.num("us_per_item"); ok {
							cells[i] = num(v)
							xs = append(xs, v)
							if calls, _ := l.num("calls"); calls > 0 {
								any = true
							}
						}
					}
				}
			}
			if !any {
				continue
			}
			w := ""
			for _, l := range s.budget {
				if l.mode == mode && l.kv["category"] == c.name {
					w = strings.ReplaceAll(l.kv["within"], ",", ", ")
					break
				}
			}
			if w == "-" {
				w = ""
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", c.name, c.what, w, strings.Join(cells, " | "), num(spreadOf(xs).median))
		}
		last := 0 // the last round that has STMT lines
		for _, l := range s.stmts {
			if l.mode == mode {
				last = max(last, l.round)
			}
		}
		var st []sbsResult
		for _, l := range s.stmts {
			if l.mode == mode && l.round == last {
				st = append(st, l)
			}
		}
		if len(st) > 0 {
			fmt.Fprintf(b, "\nTop statements of %s round %d by total time:\n\n| # | category | top level | calls | total ms | µs / item | query |\n|---|---|---|---|---|---|---|\n", mode, last)
			for _, l := range st {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", l.kv["rank"], l.kv["category"], l.kv["toplevel"], l.kv["calls"],
					l.kv["total_ms"], l.kv["us_per_item"], mdCode(l.kv["query"]))
			}
		}
		last = 0 // the consumer database's statements (p3/p3c)
		for _, l := range s.cstmts {
			if l.mode == mode {
				last = max(last, l.round)
			}
		}
		var cst []sbsResult
		for _, l := range s.cstmts {
			if l.mode == mode && l.round == last {
				cst = append(cst, l)
			}
		}
		if len(cst) > 0 {
			fmt.Fprintf(b, "\nTop statements of the consumer's database in %s round %d by total time:\n\n| # | category | top level | calls | total ms | µs / item | query |\n|---|---|---|---|---|---|---|\n", mode, last)
			for _, l := range cst {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", l.kv["rank"], l.kv["category"], l.kv["toplevel"], l.kv["calls"],
					l.kv["total_ms"], l.kv["us_per_item"], mdCode(l.kv["query"]))
			}
		}
		last = 0
		for _, l := range s.funcs {
			if l.mode == mode {
				last = max(last, l.round)
			}
		}
		var fs []sbsResult
		for _, l := range s.funcs {
			if l.mode == mode && l.round == last {
				fs = append(fs, l)
			}
		}
		if len(fs) > 0 {
			fmt.Fprintf(b, "\nFunctions of %s round %d by self time (`pg_stat_user_functions`; calls per item ≥ 1 on the success path is what HP-1 forbids):\n\n| function | calls | calls / item | total ms | self ms | self µs / item |\n|---|---|---|---|---|---|\n", mode, last)
			for _, l := range fs {
				flag := ""
				if v, _ := l.num("calls_per_item"); v >= 0.5 {
					flag = " **per item**"
				}
				fmt.Fprintf(b, "| `%s` | %s | %s%s | %s | %s | %s |\n", l.kv["name"], l.kv["calls"], l.kv["calls_per_item"], flag,
					l.kv["total_ms"], l.kv["self_ms"], l.kv["us_per_item"])
			}
		}
		fmt.Fprintln(b)
	}
}

func (s sideBySide) budgetKV(mode string, round int, key string) string {
	for _, l := range s.budget {
		if l.mode == mode && l.round == round {
			if v, ok := l.kv[key]; ok {
				return v
			}
		}
	}
	return ""
}
