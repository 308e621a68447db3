package main

import (
	"fmt"
	"strings"
)

// renderCeiling writes the P-8 table (SPEC §12a, issue 35 item 1): per round the bare write set
// of one delivery's life in plain SQL (outboxbench -mode ceiling: event, work row, attempt start,
// finish, publication; claim FOR UPDATE SKIP LOCKED, then finish + publish + delete the work
// rows; no functions, no checks), pgoutbox's P-1 and River's backlog run of the same round, with
// pgoutbox / ceiling beside pgoutbox / River. Nothing when the run has no ceiling lines.
func renderCeiling(b *strings.Builder, s sideBySide) {
	var cs, ocs, ors, rcs []float64
	type row struct {
		round                 int
		ceil, outbox, river   string
		oc, or, rc, wal, owal string
	}
	var rows []row
	cell := func(ok bool, v float64) string {
		if !ok {
			return "—"
		}
		return num(v)
	}
	ratio := func(ok bool, a, b float64, into *[]float64) string {
		if !ok || b <= 0 {
			return "—"
		}
		*into = append(*into, a/b)
		return ratioText(a / b)
	}
	for _, round := range s.rounds() {
		cr, okC := s.find("pgoutbox", "ceiling", round)
		c, okCV := cr.num("deliveries_per_sec")
		if !okC || !okCV {
			continue
		}
		cs = append(cs, c)
		or, _ := s.find("pgoutbox", "p1", round)
		o, okO := or.num("deliveries_per_sec")
		rr, _ := s.find("river", "backlog", round)
		r, okR := rr.num("jobs_per_sec")
		cw, okCW := cr.num("wal_bytes_per_event")
		ow, okOW := or.num("wal_bytes_per_event")
		rows = append(rows, row{round: round, ceil: num(c), outbox: cell(okO, o), river: cell(okR, r),
			oc: ratio(okO, o, c, &ocs), or: ratio(okO && okR, o, r, &ors), rc: ratio(okR, r, c, &rcs),
			wal: cell(okCW, cw), owal: cell(okOW, ow)})
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### P-8: the write-set ceiling (same run)\n\n")
	fmt.Fprintf(b, "The bare write set of one delivery's life in plain SQL, no functions and no checks (`outboxbench -mode ceiling`, in the same run and database cluster as River and pgoutbox, right after pgoutbox's P-1 of the round): the event and one work row per delivery appended as a backlog; %s workers each claim %s work rows `FOR UPDATE SKIP LOCKED` (lease set, attempt starts written) in one transaction, then write the finishes and the publications and delete the work rows in a second. pgoutbox's P-1 is judged against this physical limit of its own facts beside River.\n\n",
		orQ(s.first("pgoutbox", "workers")), orQ(s.first("pgoutbox", "batch")))
	fmt.Fprintf(b, "| round | ceiling deliveries/s | pgoutbox P-1 deliveries/s | River backlog jobs/s | pgoutbox / ceiling | pgoutbox / River | River / ceiling | ceiling WAL bytes / delivery | pgoutbox P-1 WAL bytes / event |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.round, r.ceil, r.outbox, r.river, r.oc, r.or, r.rc, r.wal, r.owal)
	}
	med := func(xs []float64) string {
		if len(xs) == 0 {
			return "—"
		}
		return spreadOf(xs).text()
	}
	ratioMed := func(xs []float64) string {
		if len(xs) == 0 {
			return "—"
		}
		sp := spreadOf(xs)
		return fmt.Sprintf("**%s** (%s–%s)", ratioText(sp.median), ratioText(sp.min), ratioText(sp.max))
	}
	fmt.Fprintf(b, "\n| rounds | ceiling deliveries/s, median (min–max) | pgoutbox / ceiling | pgoutbox / River | River / ceiling |\n|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n\n", len(rows), med(cs), ratioMed(ocs), ratioMed(ors), ratioMed(rcs))
}
