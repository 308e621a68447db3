package kernel

// Retention and archive (SPEC §9 R-RT-1..4, seed 000's negative tests), against real
// PostgreSQL, each call made as the role a real caller uses (outbox_retention, outbox_auditor).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

func rtSetup(t *testing.T) kernelfix.RetentionBundle {
	t.Helper()
	dx := kernelfix.Setup(t)
	return kernelfix.RetentionBundle{Bundle: dx, Ret: testdb.Conn(t, dx.Dsn, "outbox_retention"),
		Auditor: testdb.Conn(t, dx.Dsn, "outbox_auditor"), Cons: testdb.Conn(t, dx.Dsn, "outbox_consumer")}
}

// rtHot is every hot row (and every inbox receipt) as text, to prove "nothing moved".
func rtHot(t *testing.T, db *pgx.Conn) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.event_id) FROM outbox.outbox_events x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.destination, x.event_id) FROM outbox.outbox_deliveries x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.attempt_id) FROM outbox.outbox_delivery_attempt_starts x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.attempt_id) FROM outbox.outbox_delivery_attempt_finishes x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY to_jsonb(x)::text) FROM outbox.outbox_quarantine x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.event_id) FROM outbox.outbox_publications x),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.consumer_name, x.event_id) FROM inbox.inbox_receipts x),
		(SELECT count(*)::text FROM outbox.archived_events))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// rtSetDigest is the documented set digest: sha256 of "<event_id> <digest>\n" lines in event-id order.
func rtSetDigest(pairs map[string]string) string {
	ids := make([]string, 0, len(pairs))
	for id := range pairs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(id + " " + pairs[id] + "\n")
	}
	s := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(s[:])
}

// R-RT-1, R-RT-2, R-RT-3: delivered events and events whose quarantine is resolved move, with
// their deliveries, attempts and quarantine rows, in one run; the audit row carries the set
// digest of the (event_id, digest) pairs; verify_archive_run reproduces it; event_source shows
// the archived events; inbox receipts are untouched.
func TestArchiveMovesTerminalEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	delivered := []string{b.RtDelivered(t), b.RtDelivered(t), b.RtDelivered(t)}
	resolved := b.RtQuarantined(t, true)
	receiptsBefore := rtReceipts(t, b.Admin)
	digests := map[string]string{}
	for _, id := range append(append([]string{}, delivered...), resolved) {
		var d string
		if err := b.Admin.QueryRow(ctx, `SELECT event_envelope_sha256 FROM outbox.outbox_events WHERE event_id = $1::uuid`, id).Scan(&d); err != nil {
			t.Fatal(err)
		}
		digests[id] = d
	}
	startsBefore := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_starts`)

	r := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 4 || r.Skipped != 0 {
		t.Fatalf("archived %d, skipped %d; want 4, 0", r.Archived, r.Skipped)
	}
	if want := rtSetDigest(digests); r.ArchivedSetSHA256 != want {
		t.Fatalf("archived_set_sha256 %s, want %s", r.ArchivedSetSHA256, want)
	}
	for _, tbl := range []string{"outbox_events", "outbox_deliveries", "outbox_delivery_attempt_starts",
		"outbox_delivery_attempt_finishes", "outbox_quarantine", "outbox_publications"} {
		if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.`+tbl); n != 0 {
			t.Errorf("%s still holds %d rows", tbl, n)
		}
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_attempt_starts`); n != startsBefore {
		t.Errorf("archived %d attempt starts, want %d", n, startsBefore)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_quarantine WHERE event_id = $1::uuid AND row_image->>'case_id' = 'case-1'`, resolved); n != 1 {
		t.Errorf("quarantine row of %s archived %d times", resolved, n)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_events WHERE published_at IS NOT NULL`); n != 3 {
		t.Errorf("%d archived events keep their publication time, want 3", n)
	}
	// the audit row
	var runBy string
	var archived, deliveries int
	if err := b.Admin.QueryRow(ctx, `SELECT run_by, archived, deliveries FROM outbox.archive_runs WHERE run_id = $1::uuid`, r.RunID).
		Scan(&runBy, &archived, &deliveries); err != nil {
		t.Fatal(err)
	}
	if runBy == "" || archived != 4 || deliveries != 4 {
		t.Fatalf("run row: run_by %q, archived %d, deliveries %d", runBy, archived, deliveries)
	}
	// restore-drill evidence
	for _, db := range []*pgx.Conn{b.Auditor, b.Ret} {
		v, err := pgcall.VerifyArchiveRun(ctx, db, r.RunID)
		if err != nil || !v.Verified {
			t.Fatalf("verify_archive_run: %+v, %v", v, err)
		}
	}
	if p, err := pgcall.ArchiveIntegrityProblems(ctx, b.Auditor, nil, nil); err != nil || len(p) != 0 {
		t.Fatalf("archive_integrity_problems: %v, %v", p, err)
	}
	// one logical source
	var hot, arch int
	if err := b.Auditor.QueryRow(ctx, `SELECT count(*) FILTER (WHERE location = 'hot'), count(*) FILTER (WHERE location = 'archive')
		FROM outbox.event_source`).Scan(&hot, &arch); err != nil {
		t.Fatal(err)
	}
	if hot != 0 || arch != 4 {
		t.Fatalf("event_source: %d hot, %d archive", hot, arch)
	}
	var env json.RawMessage
	var sha string
	if err := b.Auditor.QueryRow(ctx, `SELECT envelope, event_envelope_sha256 FROM outbox.event_source WHERE event_id = $1::uuid`, delivered[0]).
		Scan(&env, &sha); err != nil {
		t.Fatal(err)
	}
	if got := rtCanonSHA(t, env); got != sha || sha != digests[delivered[0]] {
		t.Fatalf("event_source envelope digest %s, stored %s, appended %s", got, sha, digests[delivered[0]])
	}
	// R-RT-2: no retention path touches inbox receipts.
	if after := rtReceipts(t, b.Admin); after != receiptsBefore {
		t.Fatalf("inbox receipts changed by the archive run")
	}
	// A second run finds nothing and still writes its audit row.
	r2 := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r2.Archived != 0 || kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archive_runs`) != 2 {
		t.Fatalf("second run archived %d", r2.Archived)
	}
}

func rtReceipts(t *testing.T, db *pgx.Conn) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT coalesce(string_agg(to_jsonb(r)::text, E'\n' ORDER BY r.consumer_name, r.event_id), '')
		FROM inbox.inbox_receipts r`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == "" {
		t.Fatal("no receipts recorded")
	}
	return s
}

func rtCanonSHA(t *testing.T, env json.RawMessage) string {
	t.Helper()
	_, d, err := canon.CanonicalizeDigest(env)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// R-RT-4 (seed 000): an event with an open (pending, leased) delivery, with an unresolved
// quarantine, under a legal hold, or younger than the age is never archived: nothing moves,
// and the run reports each skip with its reason. Releasing the hold makes the held event
// eligible (the hold is honoured, and audited).
func TestArchiveNegativeCasesNothingMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	held := b.RtDelivered(t)
	unresolved := b.RtQuarantined(t, false)
	pending := kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-pending", 1)
	leased := kernelfix.Append(t, b.Admin, kernelfix.Closed, "agg-leased", 1)
	kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestCoord)
	if err := pgcall.SetLegalHold(ctx, b.Ret, held, "litigation hold L-1"); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.SetLegalHold(ctx, b.Ret, held, "again"); err != nil { // idempotent
		t.Fatal(err)
	}
	before := rtHot(t, b.Admin)

	// younger than the age: not even a candidate
	young := kernelfix.Archive(t, b.Ret, time.Hour, 1000)
	if young.Archived != 0 || young.Skipped != 0 {
		t.Fatalf("young run: %+v", young)
	}
	r := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 0 {
		t.Fatalf("archived %d events that must stay", r.Archived)
	}
	if after := rtHot(t, b.Admin); after != before {
		t.Fatal("a refused archive run changed hot rows")
	}
	reasons := map[string]string{}
	rows, err := b.Auditor.Query(ctx, `SELECT event_id::text, reason FROM outbox.archive_run_skips WHERE run_id = $1::uuid`, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		reasons[id] = reason
	}
	want := map[string]string{pending: "open_delivery", leased: "open_delivery", unresolved: "unresolved_quarantine", held: "legal_hold"}
	for id, reason := range want {
		if reasons[id] != reason {
			t.Errorf("event %s skipped as %q, want %q", id, reasons[id], reason)
		}
	}
	if r.Skipped != 4 {
		t.Errorf("skipped %d, want 4", r.Skipped)
	}
	var open, unres, holds int
	if err := b.Auditor.QueryRow(ctx, `SELECT skipped_open_delivery, skipped_unresolved_quarantine, skipped_legal_hold
		FROM outbox.archive_runs WHERE run_id = $1::uuid`, r.RunID).Scan(&open, &unres, &holds); err != nil {
		t.Fatal(err)
	}
	if open != 2 || unres != 1 || holds != 1 {
		t.Errorf("run row skip counts %d/%d/%d, want 2/1/1", open, unres, holds)
	}

	// The hold is audited, released once, and then honoured no more.
	if err := pgcall.ReleaseLegalHold(ctx, b.Ret, held); err != nil {
		t.Fatal(err)
	}
	if err := pgcall.ReleaseLegalHold(ctx, b.Ret, held); pgcall.SQLState(err) != "P0002" {
		t.Fatalf("second release: %v, want P0002", err)
	}
	if err := pgcall.SetLegalHold(ctx, b.Ret, testfix.NewUUID(), "unknown"); pgcall.SQLState(err) != "P0002" {
		t.Fatalf("hold on an unknown event: %v, want P0002", err)
	}
	var setBy, releasedBy, reason string
	if err := b.Auditor.QueryRow(ctx, `SELECT set_by, released_by, reason FROM outbox.legal_holds WHERE event_id = $1::uuid`, held).
		Scan(&setBy, &releasedBy, &reason); err != nil {
		t.Fatal(err)
	}
	if setBy == "" || releasedBy == "" || reason != "litigation hold L-1" {
		t.Fatalf("hold audit: set_by %q released_by %q reason %q", setBy, releasedBy, reason)
	}
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.legal_holds SET reason = 'rewritten' WHERE event_id = $1::uuid`, held); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("rewriting a hold: %v, want OB202", err)
	}
	r = kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 1 {
		t.Fatalf("after the release: archived %d, want the released event", r.Archived)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_events WHERE event_id = $1::uuid`, held); n != 1 {
		t.Fatal("released event not archived")
	}
}

// R-RT-4, R-SEC-3: nobody deletes from the hot or the archive tables — the owner and a superuser
// get OB202 (triggers), every other kernel role 42501 (no privilege); TRUNCATE too.
func TestArchiveDeleteRefusedForEveryRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	b.RtDelivered(t)
	b.RtDelivered(t)
	kernelfix.Archive(t, b.Ret, 0, 1) // one archived
	b.RtQuarantined(t, true)          // hot rows of every kind
	id := b.RtDelivered(t)
	if err := pgcall.SetLegalHold(ctx, b.Ret, id, "hold"); err != nil {
		t.Fatal(err)
	}
	tables := []string{"outbox_events", "outbox_deliveries", "outbox_delivery_attempt_starts", "outbox_delivery_attempt_finishes",
		"outbox_quarantine", "outbox_publications", "archived_events", "archived_deliveries", "archived_attempt_starts",
		"archived_attempt_finishes", "archived_quarantine", "archive_runs", "archive_run_skips", "legal_holds",
		"bootstrap_runs", "bootstrap_items"}
	for _, role := range append([]string{""}, pgcallKernelRolesPlusRetention()...) {
		conn := testdb.Conn(t, b.Dsn, role)
		for _, tbl := range tables {
			for _, stmt := range []string{"DELETE FROM outbox." + tbl, "TRUNCATE outbox." + tbl + " CASCADE"} {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_, err = tx.Exec(ctx, stmt)
				_ = tx.Rollback(ctx)
				want := "42501"
				if role == "" || role == "outbox_owner" {
					want = "OB202"
				}
				if got := pgcall.SQLState(err); got != want {
					t.Errorf("%q as %q: SQLSTATE %q (%v), want %s", stmt, roleName(role), got, err, want)
				}
			}
		}
	}
}

func pgcallKernelRolesPlusRetention() []string { return pgcall.KernelRoles }

func roleName(r string) string {
	if r == "" {
		return "superuser"
	}
	return r
}

// R-RT-1, R-RT-4, R-SEC-1: the retention functions run only as outbox_retention (42501 for every
// other kernel role), and outbox_retention can do nothing else: no table, no other function.
func TestArchiveRetentionRoleOnly(t *testing.T) {
	t.Parallel()
	b := rtSetup(t)
	id := b.RtDelivered(t)
	calls := []string{
		`SELECT * FROM outbox.archive_events('0 seconds'::interval, 10)`,
		`SELECT outbox.set_legal_hold('` + id + `'::uuid, 'r')`,
		`SELECT outbox.release_legal_hold('` + id + `'::uuid)`,
	}
	for _, role := range []string{"outbox_registrar", "outbox_producer", "outbox_dispatcher", "outbox_consumer", "outbox_auditor"} {
		conn := testdb.Conn(t, b.Dsn, role)
		for _, c := range calls {
			if !tryInSavepoint(t, conn, c) {
				t.Errorf("%s may call %s", role, c)
			}
		}
	}
	for _, c := range []string{
		`SELECT 1 FROM outbox.outbox_events LIMIT 1`, `SELECT 1 FROM outbox.archived_events LIMIT 1`,
		`SELECT 1 FROM outbox.event_source LIMIT 1`, `SELECT 1 FROM inbox.inbox_receipts LIMIT 1`,
		`SELECT * FROM outbox.claim_deliveries('w', ARRAY['core_operations'], 1, '1 minute')`,
		`SELECT * FROM outbox.append_event('{}'::json)`,
		`SELECT outbox.jcs_sha256('{}'::json)`,
		`SELECT * FROM outbox.bootstrap_legacy_events('pg_class'::regclass, 1, 1, 'jcs-sha256-v1', 'x', 1)`,
	} {
		if !tryInSavepoint(t, b.Ret, c) {
			t.Errorf("outbox_retention may run %s", c)
		}
	}
}

// R-RT-3: an archive row altered or removed by a superuser (triggers bypassed) makes
// verify_archive_run fail, and the completeness hook then reports the range as not intact; a
// missing run row leaves orphans the hook reports.
func TestArchiveVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	ids := []string{b.RtDelivered(t), b.RtDelivered(t), b.RtDelivered(t)}
	r := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 3 {
		t.Fatalf("archived %d", r.Archived)
	}
	tamper := func(sql string, args ...any) {
		t.Helper()
		tx, err := b.Admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantFail := func(what, problem string) {
		t.Helper()
		v, err := pgcall.VerifyArchiveRun(ctx, b.Auditor, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if v.Verified || !strings.Contains(v.Problem, problem) {
			t.Fatalf("%s: verify_archive_run = %+v, want a failure naming %q", what, v, problem)
		}
		ps, err := pgcall.ArchiveIntegrityProblems(ctx, b.Auditor, nil, nil)
		if err != nil || len(ps) == 0 {
			t.Fatalf("%s: archive_integrity_problems = %v, %v; a completeness proof could claim complete", what, ps, err)
		}
	}
	// 1. payload altered (canonical text too, consistently): the envelope digest no longer holds
	tamper(`UPDATE outbox.archived_events SET event_payload = event_payload || '{"note":"forged"}',
		event_envelope_canonical = replace(event_envelope_canonical, '"sample"', '"forged"') WHERE event_id = $1::uuid`, ids[0])
	wantFail("altered payload", "event_digest_mismatch")
	// 2. an archived delivery removed
	tamper(`DELETE FROM outbox.archived_deliveries WHERE event_id = $1::uuid`, ids[1])
	wantFail("missing delivery row", "deliveries_count_mismatch")
	// 3. an archived event removed
	tamper(`DELETE FROM outbox.archived_events WHERE event_id = $1::uuid`, ids[2])
	wantFail("missing event row", "archived_set_mismatch")
	// 4. the run row removed: its rows are orphans
	tamper(`DELETE FROM outbox.archive_runs WHERE run_id = $1::uuid`, r.RunID)
	v, err := pgcall.VerifyArchiveRun(ctx, b.Auditor, r.RunID)
	if err != nil || v.Verified || v.Problem != "unknown_run" {
		t.Fatalf("verify of a removed run: %+v, %v", v, err)
	}
	ps, err := pgcall.ArchiveIntegrityProblems(ctx, b.Auditor, nil, nil)
	if err != nil || len(ps) == 0 || !strings.Contains(ps[0].Problem, "orphan") {
		t.Fatalf("orphans not reported: %v, %v", ps, err)
	}
}

// R-RT-1: the digest is re-verified with the database's canonicalizer before an event moves; an
// event whose stored columns no longer match its digest is skipped and reported, never archived.
func TestArchiveDigestMismatchSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	good := b.RtDelivered(t)
	bad := b.RtDelivered(t)
	tx, err := b.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox.outbox_events SET event_payload = '{"seq": 0}' WHERE event_id = $1::uuid`, bad); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 1 || r.Skipped != 1 {
		t.Fatalf("archived %d skipped %d, want 1 and 1", r.Archived, r.Skipped)
	}
	var reason string
	if err := b.Auditor.QueryRow(ctx, `SELECT reason FROM outbox.archive_run_skips WHERE run_id = $1::uuid AND event_id = $2::uuid`,
		r.RunID, bad).Scan(&reason); err != nil || reason != "digest_mismatch" {
		t.Fatalf("skip of the tampered event: %q, %v", reason, err)
	}
	if kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_events WHERE event_id = $1::uuid`, bad) != 0 ||
		kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_events WHERE event_id = $1::uuid`, bad) != 1 ||
		kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_events WHERE event_id = $1::uuid`, good) != 1 {
		t.Fatal("wrong event moved")
	}
}

// R-RT-1: an archived event id can never be appended again, neither alone nor in a batch, not
// even with the very same envelope.
func TestArchivedIDNeverAppendedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	env := testfix.Envelope(kernelfix.Metering, "1", "agg-again", 1)
	id := testfix.Append(t, b.Admin, env)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	kernelfix.Ack(t, b.Disp, c)
	if r := kernelfix.Archive(t, b.Ret, 0, 10); r.Archived != 1 {
		t.Fatalf("archived %d", r.Archived)
	}
	prod := testdb.Conn(t, b.Dsn, "outbox_producer")
	raw, _ := json.Marshal(env)
	_, err := pgcall.AppendEvent(ctx, prod, pgcall.AppendParams{Event: raw})
	kernelfix.WantState(t, err, "OB105")
	if !strings.Contains(err.Error(), "archived") {
		t.Fatalf("error does not say why: %v", err)
	}
	other := testfix.Envelope(kernelfix.Metering, "1", "agg-other", 1)
	batch, _ := json.Marshal([]any{other, env})
	_, err = pgcall.AppendEvents(ctx, prod, pgcall.AppendEventsParams{Events: batch})
	kernelfix.WantState(t, err, "OB105")
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_events WHERE event_id = $1::uuid`, id); n != 0 {
		t.Fatal("archived id appended again")
	}
}

// R-RT-1, R-RT-4: a legal hold and an archive run of the same event serialize. A hold being set
// (not yet committed) makes the run leave the event alone (its row is locked: SKIP LOCKED); once
// the hold commits, the next run skips it as held. Two concurrent runs take disjoint batches.
func TestArchiveConcurrentHoldAndRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := rtSetup(t)
	held := b.RtDelivered(t)
	others := []string{b.RtDelivered(t), b.RtDelivered(t)}
	holder := testdb.Conn(t, b.Dsn, "outbox_retention")
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgcall.SetLegalHold(ctx, tx, held, "pending litigation"); err != nil {
		t.Fatal(err)
	}
	// a run while the hold is uncommitted: the held event is locked, skipped; the others move
	r := kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 2 {
		t.Fatalf("archived %d while the hold was being set, want the 2 others", r.Archived)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r = kernelfix.Archive(t, b.Ret, 0, 1000)
	if r.Archived != 0 || r.Skipped != 1 {
		t.Fatalf("after the hold: %+v", r)
	}
	for _, id := range others {
		if kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.archived_events WHERE event_id = $1::uuid`, id) != 1 {
			t.Fatalf("%s not archived", id)
		}
	}
	if kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_events WHERE event_id = $1::uuid`, held) != 1 {
		t.Fatal("held event left the hot tables")
	}

	// two runs at once: disjoint batches, every event archived exactly once
	if err := pgcall.ReleaseLegalHold(ctx, b.Ret, held); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		b.RtDelivered(t)
	}
	other := testdb.Conn(t, b.Dsn, "outbox_retention")
	tx1, err := b.Ret.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := pgcall.ArchiveEvents(ctx, tx1, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := pgcall.ArchiveEvents(ctx, other, 0, 100) // tx1 holds its 4: this run takes the rest
	if err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r1.Archived != 4 || r2.Archived != 3 {
		t.Fatalf("concurrent runs archived %d and %d, want 4 and 3", r1.Archived, r2.Archived)
	}
	if n := kernelfix.QueryInt(t, b.Admin, `SELECT count(*) FROM outbox.outbox_events`); n != 0 {
		t.Fatalf("%d events left hot", n)
	}
	for _, run := range []string{r1.RunID, r2.RunID} {
		if v, err := pgcall.VerifyArchiveRun(ctx, b.Auditor, run); err != nil || !v.Verified {
			t.Fatalf("verify %s: %+v %v", run, v, err)
		}
	}
}
