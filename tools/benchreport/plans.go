package main

// The section "Plans after growth from empty (HP-3)": what BenchmarkPlanStability appended to
// its PLAN_OUT file - one SUMMARY line per sub-benchmark and the auto_explain plans of run 2's
// last claim and ack (PLAN … ENDPLAN blocks).

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// plansHeading starts the section; benchreport -in "" -plans FILE replaces just this section.
const plansHeading = "## Plans after growth from empty (HP-3)"

type planBlock struct{ title, text string }

type planSet struct {
	summaries []sbsResult // system = benchmark name
	plans     []planBlock
}

func parsePlans(r io.Reader) (planSet, error) {
	var ps planSet
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *planBlock
	var body []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && line == "ENDPLAN":
			cur.text = strings.Join(body, "\n")
			ps.plans = append(ps.plans, *cur)
			cur, body = nil, nil
		case cur != nil:
			body = append(body, line)
		case strings.HasPrefix(line, "PLAN "):
			cur = &planBlock{title: strings.TrimPrefix(line, "PLAN ")}
		case strings.HasPrefix(line, "SUMMARY "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			res := sbsResult{system: f[1], kv: map[string]string{}}
			for _, p := range f[2:] {
				if k, v, ok := strings.Cut(p, "="); ok {
					res.kv[k] = v
				}
			}
			ps.summaries = append(ps.summaries, res)
		}
	}
	return ps, sc.Err()
}

func renderPlans(b *strings.Builder, ps planSet) {
	if len(ps.summaries) == 0 && len(ps.plans) == 0 {
		return
	}
	fmt.Fprintf(b, "%s\n\n", plansHeading)
	fmt.Fprintf(b, "BenchmarkPlanStability: a fresh, never analyzed database; ONE session (cached plans persist) runs the batch path append_events → claim_deliveries → ack_deliveries on a small backlog (run 1), then on a larger one (run 2). HP-3 wants the per-item times within 1.5×. The plans are auto_explain's (nested statements) for run 2's last claim and ack, slowest first. The structural twin is tests/kernel/plan_stability_test.go (tuples read by one claim+ack of 100 after growth, O(batch)).\n\n")
	fmt.Fprintf(b, "| benchmark | run 1 events | run 2 events | dispatch µs/item run 1 → 2 | append µs/item run 1 → 2 | dispatch ratio | path ratio | ≤ 1.5 | outbox tables analyzed |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range ps.summaries {
		v, _ := s.num("path_ratio")
		fmt.Fprintf(b, "| %s | %s | %s | %s → %s | %s → %s | %s | %s | %s | %s |\n", s.system, orQ(s.kv["run1_events"]), orQ(s.kv["run2_events"]),
			orQ(s.kv["run1_dispatch_us"]), orQ(s.kv["run2_dispatch_us"]), orQ(s.kv["run1_append_us"]), orQ(s.kv["run2_append_us"]),
			orQ(s.kv["dispatch_ratio"]), orQ(s.kv["path_ratio"]), metText(v <= 1.5), orQ(s.kv["tables_analyzed"]))
	}
	for _, p := range ps.plans {
		fmt.Fprintf(b, "\n<details><summary>%s</summary>\n\n```\n%s\n```\n\n</details>\n", p.title, strings.ReplaceAll(p.text, "```", "'''"))
	}
	fmt.Fprintln(b)
}
