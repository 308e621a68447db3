package readmodel

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// rmWorld: one database holding the outbox (reference release active) and the four reference
// consumers with their inbox (the operations projector's index is in the same database, so
// outbox.search_exact_id reads it), and a dispatcher delivering in-process to the kits.
type rmWorld struct {
	rmBundle
	kb   *consumerfix.Bundle
	prod *pgx.Conn
	d    *dispatcherfix.Running
}

func rmWorldSetup(t *testing.T) *rmWorld {
	t.Helper()
	kb := consumerfix.Setup(t)
	admin := testdb.Conn(t, kb.Dsn, "")
	testfix.ActivateReference(t, admin)
	w := &rmWorld{rmBundle: rmBundle{Bundle: kernelfix.Bundle{Dsn: kb.Dsn, Admin: admin, Disp: testdb.Conn(t, kb.Dsn, "outbox_dispatcher")},
		aud: testdb.Conn(t, kb.Dsn, "outbox_auditor")}, kb: kb, prod: testdb.Conn(t, kb.Dsn, "outbox_producer")}
	return w
}

func (w *rmWorld) startDispatcher(t *testing.T) {
	t.Helper()
	trs := map[string]transport.Transport{}
	dests := map[string]config.Destination{}
	for _, spec := range reference.All() {
		kit := w.kb.Kit(t, spec.ConsumerName, nil)
		trs[spec.Destination] = transport.Func(kit.Deliver)
		dests[spec.Destination] = config.Destination{Transport: config.TransportInProcess, Auth: config.AuthNone}
	}
	w.d = dispatcherfix.Start(t, &dispatcherfix.DB{Dsn: w.Dsn, Admin: w.Admin}, dispatcherfix.Config("rm-"+testfix.NewUUID()[:8], dests), trs)
}

func (w *rmWorld) waitDrained(t *testing.T) {
	t.Helper()
	dispatcherfix.Eventually(t, "every delivery acknowledged", func() bool {
		return kernelfix.QueryInt(t, w.Admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status <> 'acknowledged'`) == 0
	})
}

func rmSearch(t *testing.T, db *pgx.Conn, kind, id string) []pgcall.SearchHit {
	t.Helper()
	hs, err := pgcall.SearchExactID(context.Background(), db, kind, id)
	if err != nil {
		t.Fatalf("search %s %q: %v", kind, id, err)
	}
	return hs
}

// rmNoMatch asserts the single answer of a search without a match: "not_found" or
// "inconclusive/<reason>".
func rmNoMatch(t *testing.T, db *pgx.Conn, kind, id, want string) {
	t.Helper()
	hs := rmSearch(t, db, kind, id)
	got := ""
	if len(hs) == 1 {
		got = hs[0].Result
		if hs[0].Reason != nil {
			got += "/" + *hs[0].Reason
		}
	}
	if len(hs) != 1 || got != want {
		t.Fatalf("search %s %q = %d rows %q, want %q", kind, id, len(hs), got, want)
	}
}

// rmMatched returns the matched events as "eventId>operationId" (operation "-" when unlinked).
func rmMatched(t *testing.T, db *pgx.Conn, kind, id string) []string {
	t.Helper()
	var out []string
	for _, h := range rmSearch(t, db, kind, id) {
		if h.Result != "matched" || h.EventID == nil {
			t.Fatalf("search %s %q: %+v", kind, id, h)
		}
		op := "-"
		if h.OperationID != nil {
			op = *h.OperationID
		}
		out = append(out, *h.EventID+">"+op)
	}
	sort.Strings(out)
	return out
}

// R-OP-3, R-OP-1: exact-id search by every id kind against the reference projector's index
// (written in its own transaction), the wallet-first reservation linked to its operation;
// never a prefix match; not_found only under a verified_current complete proof, otherwise
// inconclusive with its reason (no_completed_snapshot, stale_snapshot, pending_deliveries,
// quarantine_open); malformed queries are 22023.
func TestSearchExactID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := rmWorldSetup(t)
	w.startDispatcher(t)
	var ids [][]string
	p := scenario.Producer{Conn: w.prod, Prefix: "s", Committed: func(x []string) { ids = append(ids, x) }}
	if err := p.Runs(ctx, 1, 3); err != nil { // run 1 is wallet-first
		t.Fatal(err)
	}
	w.waitDrained(t)
	// The run event of run 1 and its wallet reservation (appended first, in its own transaction).
	var runEvent, walletEvent string
	if err := w.Admin.QueryRow(ctx, `SELECT (SELECT event_id::text FROM outbox.outbox_events WHERE aggregate_id = 'run-s-1' AND event_type = 'run.created@2.0'),
		(SELECT event_id::text FROM outbox.outbox_events WHERE aggregate_id = 'wallet-run-s-1')`).Scan(&runEvent, &walletEvent); err != nil {
		t.Fatal(err)
	}
	rmNoMatch(t, w.aud, "runId", "run-nope", "inconclusive/no_completed_snapshot")

	want := func(kind, id string, events ...string) {
		t.Helper()
		sort.Strings(events)
		if got := rmMatched(t, w.aud, kind, id); strings.Join(got, " ") != strings.Join(events, " ") {
			t.Fatalf("search %s %q = %v, want %v", kind, id, got, events)
		}
	}
	want("eventId", runEvent, runEvent+">op-s-1")
	want("runId", "run-s-1", runEvent+">op-s-1", walletEvent+">op-s-1") // the run's aggregate, the wallet's payload runId
	want("reservationId", "wallet-run-s-1", walletEvent+">op-s-1")      // linked after the run arrived
	want("reservationId", "res-s-1", walletEvent+">op-s-1")
	want("causationId", runEvent, walletEvent+">op-s-1") // the wallet names its run as causation
	if got := rmMatched(t, w.aud, "operationId", "op-s-2"); len(got) != scenario.EventsPerRun-4 {
		// the operations projector receives 9 of the 13 event types of a run
		t.Fatalf("operationId op-s-2: %d matches %v", len(got), got)
	}
	if got := rmMatched(t, w.aud, "correlationId", "corr-s-2"); len(got) != scenario.EventsPerRun-4 {
		t.Fatalf("correlationId corr-s-2: %d matches", len(got))
	}
	var applied int64
	var last string
	if err := w.Admin.QueryRow(ctx, `SELECT applied_events, last_event_id::text FROM inbox.projection_run_summaries
		WHERE consumer_name = 'operations_projector' AND projection_name = 'operations_timeline' AND projection_version = 1`).Scan(&applied, &last); err != nil {
		t.Fatalf("run summary: %v", err)
	}
	if applied != int64(2*(scenario.EventsPerRun-4)) || last == "" { // each applied event once, a link adds none
		t.Fatalf("run summary: %d applied, last %q", applied, last)
	}

	s := rmTake(t, w.aud, `{}`)
	if s.Status != rmComplete {
		t.Fatalf("drained world proof: %s", s.Status)
	}
	rmNoMatch(t, w.aud, "runId", "run-nope", "not_found")
	rmNoMatch(t, w.aud, "runId", "run-s-", "not_found")   // never a prefix match
	rmNoMatch(t, w.aud, "runId", "RUN-S-1", "not_found")  // never a case-folded match
	rmNoMatch(t, w.aud, "runId", "run-s-1 ", "not_found") // nor a trimmed one
	rmNoMatch(t, w.aud, "eventId", testfix.NewUUID(), "not_found")
	for _, bad := range [][2]string{{"runid", "x"}, {"runId", ""}, {"eventId", "not-a-uuid"}, {"eventId", strings.ToUpper(runEvent)}, {"runId", strings.Repeat("x", 201)}} {
		_, err := pgcall.SearchExactID(ctx, w.aud, bad[0], bad[1])
		kernelfix.WantState(t, err, "22023")
	}

	// A new event after the proof: not_found is refused while the proof is stale.
	if err := w.d.Stop(t); err != nil {
		t.Fatal(err)
	}
	kernelfix.Append(t, w.Admin, kernelfix.Metering, "att-after", 1)
	rmNoMatch(t, w.aud, "runId", "run-nope", "inconclusive/stale_snapshot")
	rmTake(t, w.aud, `{}`)
	rmNoMatch(t, w.aud, "runId", "run-nope", "inconclusive/pending_deliveries")
	c := kernelfix.ClaimOne(t, w.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, w.Disp, kernelfix.FenceOf(c), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	rmNoMatch(t, w.aud, "runId", "run-nope", "inconclusive/stale_snapshot")
	rmTake(t, w.aud, `{}`)
	rmNoMatch(t, w.aud, "runId", "run-nope", "inconclusive/quarantine_open")
	want("runId", "run-s-2", rmMatched(t, w.aud, "runId", "run-s-2")...) // a match never needs a proof
	_ = ids
}

// R-OP-1: a wallet-first reservation links to its run only on causation = the run event's id
// AND the same tenant. A reservation that shares the operation and correlation ids but names
// another causation, or another workspace, stays pending-unlinked when the run arrives (no
// fake link); one arriving after its run with a mismatching causation waits unlinked too.
func TestReadModelProjectorLinksByCausationAndTenant(t *testing.T) {
	t.Parallel()
	spec := consumerfix.Spec(t, reference.OperationsProjector)
	b := consumerfix.Setup(t)
	kit := b.Kit(t, spec.ConsumerName, nil)
	mk := func(i int) (map[string]any, map[string]any) {
		run := consumerfix.Env(reference.RunCreated, fmt.Sprintf("run-l%d", i), 1)
		wallet := consumerfix.Env(reference.WalletReserved, fmt.Sprintf("reservation-l%d", i), 1)
		for _, e := range []map[string]any{run, wallet} {
			e["operationId"], e["correlationId"] = fmt.Sprintf("op-l%d", i), fmt.Sprintf("corr-l%d", i)
		}
		wallet["causationId"] = run["eventId"]
		return run, wallet
	}
	outcome := func(r wire.Result) string {
		t.Helper()
		var m map[string]any
		testfix.Must(t, consumerfix.JSONUnmarshal(consumerfix.WantAck(t, r).Receipt, &m))
		return fmt.Sprint(m["projectionOutcome"])
	}
	pending := func(eventID string) bool {
		return consumerfix.Count(t, b.Pool, `SELECT count(*) FROM refconsumer_operations.pending_unlinked_reservations
			WHERE event_id = '`+eventID+`' AND linked_at IS NULL`) == 1
	}
	// 1. wrong causation, wallet first: stays pending after the run
	run1, wallet1 := mk(1)
	wallet1["causationId"] = testfix.NewUUID()
	if o := outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, wallet1))); o != reference.OutcomeReservationPending {
		t.Fatalf("wallet first: %s", o)
	}
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, run1)))
	if !pending(wallet1["eventId"].(string)) {
		t.Fatal("a reservation caused by another event was linked to the run")
	}
	// 2. other workspace, wallet first: stays pending
	run2, wallet2 := mk(2)
	wallet2["tenant"] = map[string]any{"tenantKind": "organization", "tenantId": "tenant-1", "workspaceId": "workspace-other"}
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, wallet2)))
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, run2)))
	if !pending(wallet2["eventId"].(string)) {
		t.Fatal("a reservation of another tenant workspace was linked to the run")
	}
	// 3. proven: linked
	run3, wallet3 := mk(3)
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, wallet3)))
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, run3)))
	if pending(wallet3["eventId"].(string)) {
		t.Fatal("the proven reservation was not linked")
	}
	// 4. run first, then a wallet with a mismatching causation: waits unlinked, no link
	run4, wallet4 := mk(4)
	outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, run4)))
	wallet4["causationId"] = run3["eventId"]
	if o := outcome(consumerfix.Deliver(t, kit, consumerfix.Delivery(t, spec, wallet4))); o != reference.OutcomeReservationPending {
		t.Fatalf("wallet with another causation after the run: %s", o)
	}
	if n := consumerfix.Count(t, b.Pool, `SELECT count(*) FROM refconsumer_operations.operations WHERE operation_id = 'op-l4' AND reservation_id IS NOT NULL`); n != 0 || !pending(wallet4["eventId"].(string)) {
		t.Fatal("a mismatching reservation was linked")
	}
	// The index maps the unlinked reservations to no operation, the linked one to its operation.
	if n := consumerfix.Count(t, b.Pool, `SELECT count(*) FROM inbox.projection_exact_ids WHERE id_kind = 'eventId'
		AND event_id IN ('`+wallet1["eventId"].(string)+`', '`+wallet2["eventId"].(string)+`') AND operation_id IS NULL`); n != 2 {
		t.Fatalf("unlinked reservations in the index with an operation: %d", 2-n)
	}
	if n := consumerfix.Count(t, b.Pool, `SELECT count(*) FROM inbox.projection_exact_ids WHERE id_kind = 'eventId'
		AND event_id = '`+wallet3["eventId"].(string)+`' AND operation_id = 'op-l3'`); n != 1 {
		t.Fatal("the linked reservation is not indexed to its operation")
	}
}

// R-OP-3: not_found for an index kind also needs the projector's index to cover every event the
// projector acknowledged. Acks recorded without the reference projector (its inbox elsewhere):
// the proof is complete, an eventId search may say not_found, a runId search is inconclusive
// source_gap - never a false not_found.
func TestSearchRefusesNotFoundWithoutIndex(t *testing.T) {
	t.Parallel()
	b := rmSetup(t)
	run := kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-ni-1", 1)
	rmDrain(t, b)
	rmExpect(t, b, "drained without projector", `{}`, rmComplete)
	rmNoMatch(t, b.aud, "runId", "run-ni-1", "inconclusive/source_gap")
	rmNoMatch(t, b.aud, "eventId", testfix.NewUUID(), "not_found")
	if got := rmMatched(t, b.aud, "eventId", run); len(got) != 1 || got[0] != run+">-" {
		t.Fatalf("eventId match: %v", got)
	}
}

// R-OP-1, R-SEC-5: the projector's index is written only as the consumer itself: another
// consumer's login is refused (42501, nothing written), malformed ids are 22023.
func TestReadModelIndexBoundToConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	roleA, urlA := kernelfix.Login(t, admin, dsn, "outbox_consumer")
	roleB, urlB := kernelfix.Login(t, admin, dsn, "outbox_consumer")
	testfix.Must(t, pgcall.BindConsumerRole(ctx, reg, "operations_projector", roleA))
	testfix.Must(t, pgcall.BindConsumerRole(ctx, reg, "other_projector", roleB))
	connA, err := pgx.Connect(ctx, urlA)
	testfix.Must(t, err)
	defer connA.Close(ctx)
	connB, err := pgx.Connect(ctx, urlB)
	testfix.Must(t, err)
	defer connB.Close(ctx)
	call := `SELECT inbox.record_projection_ids('operations_projector', 'operations_timeline', 1, $1::uuid, NULL, $2::json)`
	_, err = connB.Exec(ctx, call, testfix.NewUUID(), `{"runId":"r"}`)
	kernelfix.WantState(t, err, "42501")
	for _, ids := range []string{`[]`, `{"runid":"r"}`, `{"runId":""}`, `{"runId":1}`, `{"runId":["` + strings.Repeat("x", 201) + `"]}`} {
		_, err := connA.Exec(ctx, call, testfix.NewUUID(), ids)
		kernelfix.WantState(t, err, "22023")
	}
	if _, err := connA.Exec(ctx, call, testfix.NewUUID(), `{"runId":["r1","r2"],"eventId":"e"}`); err != nil {
		t.Fatal(err)
	}
	if n := kernelfix.QueryInt(t, admin, `SELECT count(*) FROM inbox.projection_exact_ids`); n != 3 {
		t.Fatalf("%d index rows, want 3 (only A's call)", n)
	}
}
