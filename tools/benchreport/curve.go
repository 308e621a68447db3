package main

// The scale curve (SPEC R-DP-9, issue 40 item 4): P-1 with 1, 2 and 4 dispatcher connections and
// 1 and 4 destinations, each after its River counterpart (a pool of that many connections, that
// many jobs per event), from the label=curve RESULT lines of scripts/bench-river.sh.

import (
	"fmt"
	"sort"
	"strings"
)

// curveLabel marks the scale curve's RESULT lines.
const curveLabel = "curve"

// curvePoint is one (connections, destinations) cell of the curve over its rounds.
type curvePoint struct {
	workers, dests              int
	river, outbox, events       spread
	ratio                       spread
	riverRuns, outboxRuns, pair int
}

// curvePoints pairs, per round, River's run (pool_conns, jobs_per_event) with pgoutbox's
// (workers, destinations) of the same cell; rows sorted by destinations, then connections.
func curvePoints(s sideBySide) []curvePoint {
	type cell struct{ w, d int }
	type side struct{ river, outbox map[int]sbsResult }
	cells := map[cell]*side{}
	at := func(c cell) *side {
		if cells[c] == nil {
			cells[c] = &side{map[int]sbsResult{}, map[int]sbsResult{}}
		}
		return cells[c]
	}
	for _, r := range s.curve {
		switch r.system {
		case "river":
			w, okW := r.num("pool_conns")
			d, okD := r.num("jobs_per_event")
			if okW && okD {
				at(cell{int(w), int(d)}).river[r.round] = r
			}
		case "pgoutbox":
			w, okW := r.num("workers")
			d, okD := r.num("destinations")
			if okW && okD {
				at(cell{int(w), int(d)}).outbox[r.round] = r
			}
		}
	}
	var out []curvePoint
	for c, sd := range cells {
		p := curvePoint{workers: c.w, dests: c.d}
		var rs, os, es, ratios []float64
		for _, r := range sd.river {
			if v, ok := r.num("jobs_per_sec"); ok {
				rs = append(rs, v)
			}
		}
		for round, o := range sd.outbox {
			ov, ok := o.num("deliveries_per_sec")
			if !ok {
				continue
			}
			os = append(os, ov)
			if e, ok := o.num("events_published_per_sec"); ok {
				es = append(es, e)
			}
			if r, ok := sd.river[round]; ok {
				if rv, ok := r.num("jobs_per_sec"); ok && rv > 0 {
					ratios = append(ratios, ov/rv)
				}
			}
		}
		p.river, p.outbox, p.events, p.ratio = spreadOf(rs), spreadOf(os), spreadOf(es), spreadOf(ratios)
		p.riverRuns, p.outboxRuns, p.pair = len(rs), len(os), len(ratios)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].dests != out[j].dests {
			return out[i].dests < out[j].dests
		}
		return out[i].workers < out[j].workers
	})
	return out
}

// speedup is a median against the fewest-connections median of the same destinations ("—"
// without one).
func speedup(v, base spread) string {
	if v.n == 0 || base.n == 0 || base.median <= 0 {
		return "—"
	}
	return ratioText(v.median/base.median) + "×"
}

func renderCurve(b *strings.Builder, s sideBySide) {
	if len(s.curve) == 0 {
		return
	}
	pts := curvePoints(s)
	fmt.Fprintf(b, "### Scale curve: P-1 by connections and destinations (R-DP-9)\n\n")
	fmt.Fprintf(b, "The same pre-appended backlog of %s events per run, dispatched with 1, 2 and 4 connections to 1 and 4 destinations, each run right after its River counterpart in the same round. pgoutbox: `outboxbench -mode p1 -workers W -destinations D` (W outbox_dispatcher connections; with D = 4 three more mandatory destinations of metering_input_processor's kind, so every event has 4 deliveries, all claimed by the same workers). River: `riverbench -mode backlog -pool-conns W -jobs-per-event D` (a pgxpool of W connections, the client in poll-only mode so no LISTEN connection takes one of them, MaxWorkers %s; D jobs per event inserted side by side in the same InsertMany batch, so River works D jobs per event as pgoutbox makes D deliveries). The ratio compares deliveries/s with worked jobs/s, per pair; \"vs 1 conn\" is each side's median against its own median with 1 connection and the same destinations, so where it stops growing the curve flattens on this machine.\n\n",
		orQ(curveFirst(s, "pgoutbox", "events")), orQ(curveFirst(s, "river", "max_workers")))
	fmt.Fprintf(b, "| connections | destinations | pairs | River jobs/s | River vs 1 conn | pgoutbox deliveries/s | pgoutbox events/s | pgoutbox vs 1 conn | pgoutbox / River |\n|---|---|---|---|---|---|---|---|---|\n")
	base := map[int]curvePoint{}
	for _, p := range pts {
		if have, ok := base[p.dests]; !ok || p.workers < have.workers {
			base[p.dests] = p
		}
	}
	for _, p := range pts {
		bp := base[p.dests]
		ratio := "—"
		if p.pair > 0 {
			ratio = "**" + ratioText(p.ratio.median) + "**"
			if p.pair > 1 {
				ratio += " (" + ratioText(p.ratio.min) + "–" + ratioText(p.ratio.max) + ")"
			}
		}
		fmt.Fprintf(b, "| %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", p.workers, p.dests, p.pair,
			p.river.text(), speedup(p.river, bp.river), p.outbox.text(), p.events.text(), speedup(p.outbox, bp.outbox), ratio)
	}
	fmt.Fprintf(b, "\nEvery figure is one run per round (median (min–max) over the rounds when there are several). The database and both benchmark processes share this machine's cores: the curve shows where throughput flattens here, not on a dedicated database server.\n\n")
}

// curveFirst returns the value of key in the first curve result of system that has it.
func curveFirst(s sideBySide, system, key string) string {
	for _, r := range s.curve {
		if v, ok := r.kv[key]; ok && r.system == system {
			return v
		}
	}
	return ""
}
