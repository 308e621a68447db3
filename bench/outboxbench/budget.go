//go:build bench

package main

// The per-statement budget of SPEC §12a HP-6: where the time of the measured phase went,
// from pg_stat_statements (track = all) and pg_stat_user_functions (track_functions = all),
// plus the WAL written per delivered event (P-4). Printed as BUDGET, STMT and FUNC lines after
// the RESULT line (scripts/bench-river.sh collects them for benchreport); on a foreign cluster
// only when the extension is available.
//
// Line formats and how µs per item is computed:
// docs/benchmarks.md#the-per-statement-budget-benchoutboxbenchbudgetgo.

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

type budget struct {
	stmts bool   // pg_stat_statements is there and was reset for this database
	note  string // why not, when not
	dbid  uint32
	lsn0  string
	fns0  map[string]fnStat // pg_stat_user_functions at the start (the run's figures are deltas)
}

type fnStat struct {
	calls       int64
	total, self float64
}

// flushStats makes the pending statistics of conns (function calls are counted in the backend
// and reach shared memory when it goes idle) visible to other sessions.
func flushStats(ctx context.Context, conns []*pgx.Conn) error {
	for _, c := range conns {
		if _, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
			return err
		}
	}
	return nil
}

func readFunctions(ctx context.Context, admin *pgx.Conn) (map[string]fnStat, error) {
	if _, err := admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return nil, err
	}
	rows, err := admin.Query(ctx, `SELECT schemaname || '.' || funcname, calls, total_time, self_time FROM pg_stat_user_functions WHERE schemaname IN ('outbox', 'inbox')`)
	if err != nil {
		return nil, err
	}
	out := map[string]fnStat{}
	for rows.Next() {
		var name string
		var f fnStat
		if err := rows.Scan(&name, &f.calls, &f.total, &f.self); err != nil {
			return nil, err
		}
		g := out[name] // overloaded names add up
		out[name] = fnStat{g.calls + f.calls, g.total + f.total, g.self + f.self}
	}
	return out, rows.Err()
}

// startBudget opens the measured phase: creates pg_stat_statements in the bench database when
// the cluster preloads it and resets its entries for this database, takes the function
// statistics as they are (conns: the connections that ran anything before) and records the
// WAL position.
func startBudget(ctx context.Context, admin *pgx.Conn, conns []*pgx.Conn) (*budget, error) {
	b := &budget{}
	if err := flushStats(ctx, conns); err != nil {
		return nil, err
	}
	if err := admin.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&b.dbid); err != nil {
		return nil, err
	}
	var preloaded bool
	if err := admin.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_stat_statements($|[ ,])'
	                                  AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&preloaded); err != nil {
		return nil, err
	}
	switch {
	case !preloaded:
		b.note = "pg_stat_statements is not preloaded on this cluster (scripts/pg.sh up configures the local one)"
	default:
		if _, err := admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			b.note = "CREATE EXTENSION pg_stat_statements: " + err.Error()
		} else if _, err := admin.Exec(ctx, `SELECT pg_stat_statements_reset(0, $1::oid, 0)`, b.dbid); err != nil {
			b.note = "pg_stat_statements_reset: " + err.Error()
		} else {
			b.stmts = true
		}
	}
	var err error
	if b.fns0, err = readFunctions(ctx, admin); err != nil {
		return nil, err
	}
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&b.lsn0); err != nil {
		return nil, err
	}
	return b, nil
}

// category classifies one pg_stat_statements entry by its query text (first match wins).
// A statement's time includes everything it calls (functions, triggers, FK checks), so the
// categories overlap along the nesting: within names the categories whose statements already
// contain this one's time.
type category struct {
	name, within string
	toplevel     int  // 1: top-level only, -1: nested only, 0: either
	perItem      bool // only statements run at least once per item (calls >= items/2)
	re           *regexp.Regexp
}

var categories = []category{
	{"claim_call", "", 1, false, regexp.MustCompile(`outbox\.claim_deliveries\s*\(`)},
	{"ack_call", "", 1, false, regexp.MustCompile(`outbox\.ack_deliveries\s*\(`)},
	{"append_call", "", 1, false, regexp.MustCompile(`outbox\.append_events\s*\(`)},
	// the nested statement of a public outcome function that runs its parse and its private
	// body (migration 046: outbox._ack_outcomes(outbox._outcome_items(...)) and the retry and
	// quarantine ones): it contains the whole call, so it is in no category of the budget (not
	// in categoryOrder) and its parts are counted by their own statements
	{"outcome_body", "ack_call", -1, false, regexp.MustCompile(`outbox\._(ack|retry|quarantine)_outcomes\s*\(`)},
	// the foreign-key checks of attempt starts and finishes (RI trigger queries)
	{"attempt_fk", "claim,ack_update,attempt_rows", -1, false, regexp.MustCompile(`(?is)^SELECT \$?\d+ FROM ONLY "outbox"\."outbox_(deliveries|delivery_attempt_starts|events)" x .*FOR KEY SHARE`)},
	// the ack's lock of its deliveries in key order (counted with the judge)
	// (and the typed parse of outbox._outcome_items, HP-2: ROWS FROM (unnest(p_destinations), ...))
	{"judge", "ack_call", -1, false, regexp.MustCompile(`(?i)_lock_deliveries|unnest\(p_destinations,\s*p_event_ids\)|rows\s+from\s*\(\s*pg_catalog\.unnest\(p_destinations\)`)},
	// claim: the claiming statement (with its attempt-start insert when that is a CTE of it),
	// the recovery probe and the argument checks
	{"claim", "claim_call", -1, false, regexp.MustCompile(`(?is)skip\s+locked|lease_token\s*=\s*pg_catalog\.gen_random_uuid|_dispatch_recover|unnest\(p_destinations\)|lease_expires_at\s*<=`)},
	// ack update: the outcome's update of the delivery rows (with the finish insert when that is
	// a CTE of it)
	{"ack_update", "ack_call", -1, false, regexp.MustCompile(`(?is)update\s+outbox\.outbox_deliveries\b.*delivered_at`)},
	// attempt rows: attempt starts and finishes inserted by statements of their own
	{"attempt_rows", "claim_call,ack_call", -1, false, regexp.MustCompile(`(?i)insert\s+into\s+outbox\.outbox_delivery_attempt_(starts|finishes)\b`)},
	// publication: the set-based insert, its guards and the trigger statements checking it
	{"publication", "ack_call", -1, false, regexp.MustCompile(`(?i)outbox_publications|_publish_events|new_publications|pgoutbox\.publishing|p_event_ids`)},
	// the deferred delivery-set check of appended events (a constraint trigger run at commit,
	// so top level)
	{"append", "append_call,commit", 0, false, regexp.MustCompile(`(?i)_check_event_delivery_set`)},
	// append: what append_events does inside (validation, event and delivery rows)
	{"append", "append_call,commit", -1, false, regexp.MustCompile(`(?i)insert\s+into\s+outbox\.outbox_(events|deliveries)\b|_append_validate|_envelope_fail|delivery_set_members|delivery_set_applicable_events|archived_events|kernel_settings|canonical_texts`)},
	// per item: statements of functions called once per item (HP-1 says none on the success path)
	{"per_item", "judge,append", -1, true, regexp.MustCompile(``)},
	// judge: parsing the items and every R-AK-2 check of the receipts and acks, batch-level
	{"judge", "ack_call", -1, false, regexp.MustCompile(`(?i)_ack_problem|_fence_problem|_jcs_|jcs_|_json_int|_batch_items|_lock_deliveries|json_to_recordset|json_array_elements|json_object_keys|receipt_kinds|_raise_item|sha256`)},
}

var categoryOrder = []string{"claim_call", "claim", "ack_call", "judge", "per_item", "ack_update", "attempt_rows", "attempt_fk", "publication", "append_call", "append", "other"}

func within(name string) string {
	for _, c := range categories {
		if c.name == name {
			return c.within
		}
	}
	return ""
}

func classify(query string, toplevel bool, calls int64, items int) string {
	for _, c := range categories {
		if (c.toplevel == 1 && !toplevel) || (c.toplevel == -1 && toplevel) || (c.perItem && calls*2 < int64(items)) {
			continue
		}
		if c.re.MatchString(query) {
			return c.name
		}
	}
	return "other"
}

var spaces = regexp.MustCompile(`\s+`)

// oneLine is query on one line, cut to about n characters.
func oneLine(query string, n int) string {
	q := strings.TrimSpace(spaces.ReplaceAllString(query, " "))
	if r := []rune(q); len(r) > n {
		q = string(r[:n]) + "…"
	}
	return q
}

func us(ms float64, items int) string {
	return strconv.FormatFloat(ms*1000/float64(max(items, 1)), 'f', 1, 64)
}

func msText(ms float64) string { return strconv.FormatFloat(ms, 'f', 1, 64) }

// finish closes the measured phase: the WAL written since startBudget (bytes per item) and,
// when pg_stat_statements is there, the BUDGET, STMT and FUNC lines of the run. conns are the
// connections that ran the workload: their pending statistics are flushed first.
func (b *budget) finish(ctx context.Context, admin *pgx.Conn, conns []*pgx.Conn, mode string, items, top int) (walPerItem float64, lines []string, err error) {
	var wal float64
	if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8`, b.lsn0).Scan(&wal); err != nil {
		return 0, nil, err
	}
	walPerItem = wal / float64(max(items, 1))
	if err := flushStats(ctx, conns); err != nil {
		return 0, nil, err
	}
	prefix := "pgoutbox " + mode + " "
	if !b.stmts {
		return walPerItem, []string{"BUDGET " + prefix + "unavailable=1 note=" + strings.ReplaceAll(b.note, " ", "_")}, nil
	}
	rows, err := admin.Query(ctx, `SELECT toplevel, calls, total_exec_time, rows, query
	                                 FROM pg_stat_statements WHERE dbid = $1::oid AND calls > 0
	                                  AND query !~* 'pg_stat_|pg_database|pg_current_wal_lsn|^\s*(SET|RESET|SHOW|BEGIN|COMMIT|ROLLBACK|SELECT \$1$)\M'
	                                ORDER BY total_exec_time DESC`, b.dbid)
	if err != nil {
		return 0, nil, err
	}
	type stmt struct {
		toplevel    bool
		calls, rows int64
		ms          float64
		query       string
	}
	var all []stmt
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.toplevel, &s.calls, &s.ms, &s.rows, &s.query); err != nil {
			return 0, nil, err
		}
		all = append(all, s)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	type agg struct {
		calls, n int64
		ms       float64
	}
	sums := map[string]*agg{}
	for _, s := range all {
		c := classify(s.query, s.toplevel, s.calls, items)
		if sums[c] == nil {
			sums[c] = &agg{}
		}
		sums[c].calls += s.calls
		sums[c].ms += s.ms
		sums[c].n++
	}
	for _, c := range categoryOrder {
		a := sums[c]
		if a == nil {
			a = &agg{}
		}
		w := within(c)
		if w == "" {
			w = "-"
		}
		lines = append(lines, fmt.Sprintf("BUDGET %scategory=%s calls=%d total_ms=%s us_per_item=%s statements=%d within=%s",
			prefix, c, a.calls, msText(a.ms), us(a.ms, items), a.n, w))
	}
	for i, s := range all[:min(top, len(all))] {
		lines = append(lines, fmt.Sprintf("STMT %srank=%d toplevel=%t category=%s calls=%d total_ms=%s us_per_item=%s rows=%d query=%s",
			prefix, i+1, s.toplevel, classify(s.query, s.toplevel, s.calls, items), s.calls, msText(s.ms), us(s.ms, items), s.rows, oneLine(s.query, 100)))
	}

	now, err := readFunctions(ctx, admin)
	if err != nil {
		return 0, nil, err
	}
	type fn struct {
		name        string
		calls       int64
		total, self float64
	}
	var fns []fn
	for name, f := range now {
		g := b.fns0[name]
		if d := (fn{name, f.calls - g.calls, f.total - g.total, f.self - g.self}); d.calls > 0 {
			fns = append(fns, d)
		}
	}
	sort.SliceStable(fns, func(i, j int) bool { return fns[i].self > fns[j].self })
	for i, f := range fns[:min(top, len(fns))] {
		lines = append(lines, fmt.Sprintf("FUNC %srank=%d name=%s calls=%d calls_per_item=%s total_ms=%s self_ms=%s us_per_item=%s",
			prefix, i+1, f.name, f.calls, strconv.FormatFloat(float64(f.calls)/float64(max(items, 1)), 'f', 2, 64),
			msText(f.total), msText(f.self), us(f.self, items)))
	}
	return walPerItem, lines, nil
}

// median of xs (milliseconds), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// statsOff turns statement and function statistics off for every later session of the bench
// database (both settings are superuser-settable per database), so a run shows their overhead.
func statsOff(ctx context.Context, server, db string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{db}.Sanitize()
	for _, q := range []string{"ALTER DATABASE " + id + " SET track_functions = 'none'"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	var preloaded bool
	if err := conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'`).Scan(&preloaded); err != nil {
		return err
	}
	if preloaded {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" SET pg_stat_statements.track = 'none'"); err != nil {
			return err
		}
	}
	return nil
}
