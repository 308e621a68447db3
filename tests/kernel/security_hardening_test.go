package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-SEC-5 (finding 1): a consumer acts only as itself. Two consumers share a database, each with
// its own role bound to its name; consumer B's login can neither record a receipt under A's name
// (the forged-receipt attack), nor read A's receipts, nor move A's revision progress - 42501 and
// nothing written; an unbound name is refused for every non-superuser; A's own login works.
// Binding is the registrar's: a kernel group role cannot be bound, a bound name cannot be moved
// to another role, and a consumer cannot bind itself.
func TestConsumerActsOnlyAsItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	roleA, urlA := kernelfix.Login(t, admin, dsn, "outbox_consumer")
	roleB, urlB := kernelfix.Login(t, admin, dsn, "outbox_consumer")
	if err := pgcall.BindConsumerRole(ctx, reg, consumerfix.Metering, roleA); err != nil {
		t.Fatalf("bind A: %v", err)
	}
	if err := pgcall.BindConsumerRole(ctx, reg, "other_consumer", roleB); err != nil {
		t.Fatalf("bind B: %v", err)
	}
	if err := pgcall.BindConsumerRole(ctx, reg, consumerfix.Metering, roleA); err != nil {
		t.Fatalf("the same binding again must be a no-op: %v", err)
	}
	kernelfix.WantSQLState(t, pgcall.BindConsumerRole(ctx, reg, consumerfix.Metering, roleB), "42710", "rebinding a name to another role")
	kernelfix.WantSQLState(t, pgcall.BindConsumerRole(ctx, reg, "third_consumer", "outbox_consumer"), "22023", "binding a kernel group role")
	kernelfix.WantSQLState(t, pgcall.BindConsumerRole(ctx, reg, "third_consumer", "no_such_role_x"), "22023", "binding an unknown role")

	connA, err := pgx.Connect(ctx, urlA)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Close(ctx)
	connB, err := pgx.Connect(ctx, urlB)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close(ctx)
	kernelfix.WantSQLState(t, pgcall.BindConsumerRole(ctx, connB, "other_consumer", roleB), "42501", "a consumer binding a name itself")

	env, envSHA, doc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": "forged"})
	receipts := func() int {
		return consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts`)
	}
	_, err = consumerfix.Record(ctx, connB, consumerfix.Metering, "", 0, env, doc.Receipt)
	kernelfix.WantSQLState(t, err, "42501", "B records a receipt as A")
	_, err = consumerfix.Record(ctx, connB, "unbound_consumer", "", 0, env, doc.Receipt)
	kernelfix.WantSQLState(t, err, "42501", "B records a receipt under an unbound name")
	_, err = pgcall.ObserveRevision(ctx, connB, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-1", AggregateRevision: 1})
	kernelfix.WantSQLState(t, err, "42501", "B moves A's revision progress")
	_, err = connB.Exec(ctx, `SELECT * FROM inbox.read_receipt($1, '', 0, $2::uuid, NULL)`, consumerfix.Metering, testfix.NewUUID())
	kernelfix.WantSQLState(t, err, "42501", "B reads A's receipts")
	// The one-round-trip path's hot path (issue 36: the caller rule as a predicate) refuses too.
	var envDoc struct {
		EventID string `json:"eventId"`
	}
	_ = json.Unmarshal(env, &envDoc)
	_, err = pgcall.AcceptDelivery(ctx, connB, pgcall.AcceptDeliveryParams{ConsumerName: consumerfix.Metering,
		EventID: envDoc.EventID, EnvelopeSHA256: envSHA, EventEnvelope: env, Receipt: doc.Receipt, DigestCandidate: doc.Candidate})
	kernelfix.WantSQLState(t, err, "42501", "B accepts a delivery as A")
	err = pgcall.ConfirmDelivery(ctx, connB, pgcall.ConfirmDeliveryParams{ConsumerName: consumerfix.Metering, EventID: envDoc.EventID})
	kernelfix.WantSQLState(t, err, "42501", "B confirms a delivery as A")
	if n := receipts(); n != 0 {
		t.Fatalf("refused calls wrote %d receipts", n)
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_revision_progress`); n != 0 {
		t.Fatalf("refused observe_revision wrote %d progress rows", n)
	}

	// A as itself, directly and through SET ROLE from a login that is a member of A's role.
	r, err := consumerfix.Record(ctx, connA, consumerfix.Metering, "", 0, env, doc.Receipt)
	if err != nil || r.Outcome != "new" {
		t.Fatalf("A records its own receipt: %+v %v", r, err)
	}
	if out, err := pgcall.ObserveRevision(ctx, connA, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-1", AggregateRevision: 1}); err != nil || out != pgcall.RevisionApply {
		t.Fatalf("A observes its own revision: %q %v", out, err)
	}
	_, urlC := kernelfix.Login(t, admin, dsn, roleA)
	connC, err := pgx.Connect(ctx, urlC)
	if err != nil {
		t.Fatal(err)
	}
	defer connC.Close(ctx)
	if _, err := connC.Exec(ctx, `SET ROLE `+roleA); err != nil {
		t.Fatal(err)
	}
	if r, err := consumerfix.Record(ctx, connC, consumerfix.Metering, "", 0, env, doc.Receipt); err != nil || r.Outcome != "existing" {
		t.Fatalf("a member of A's role (SET ROLE) records A's receipt again: %+v %v", r, err)
	}
	// B switching to a role it is not a member of is refused by PostgreSQL itself.
	if _, err := connB.Exec(ctx, `SET ROLE `+roleA); err == nil {
		t.Fatal("B could SET ROLE to A's role")
	}

	// The bindings are append-only, for every role, the owner included (OB202).
	owner := testdb.Conn(t, dsn, "outbox_owner")
	for _, q := range []string{`UPDATE inbox.consumer_roles SET role_name = 'x'`, `DELETE FROM inbox.consumer_roles`, `TRUNCATE inbox.consumer_roles`} {
		_, err := owner.Exec(ctx, q)
		kernelfix.WantSQLState(t, err, "OB202", q)
	}
}

// R-SEC-5 (finding 2): no advisory-lock key a kernel function waits on. A login with no kernel
// role holds the advisory keys the registry and observe_revision used to wait on; activation,
// registration and a first observation still complete (a 5 s statement timeout turns a wait
// into a failure), and the same login cannot take the locks they use instead (table/row locks
// need privileges it does not have).
func TestOutsiderCannotBlockKernelLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	_, outsiderURL := kernelfix.Login(t, admin, dsn)
	out, err := pgx.Connect(ctx, outsiderURL)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	for _, q := range []string{
		`SELECT pg_advisory_lock(hashtext('pgoutbox.activate_delivery_set'))`,
		`SELECT pg_advisory_lock(hashtext('pgoutbox.delivery_set_version'), 1)`,
		`SELECT pg_advisory_lock(pg_catalog.hashtextextended(pg_catalog.concat_ws(pg_catalog.chr(31), 'inbox.observe_revision', 'metering_input_processor_consumer', '', '0', 'agg-lock'), 0))`,
	} {
		if _, err := out.Exec(ctx, q); err != nil {
			t.Fatalf("outsider %s: %v", q, err)
		}
	}
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	if _, err := reg.Exec(ctx, `SET statement_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	testfix.ActivateReference(t, reg) // register + activate: would wait forever on the old keys
	cons := testdb.Conn(t, dsn, "outbox_consumer")
	if _, err := cons.Exec(ctx, `SET statement_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if o, err := pgcall.ObserveRevision(ctx, cons, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-lock", AggregateRevision: 2}); err != nil || o != pgcall.RevisionGap {
		t.Fatalf("observe_revision with the old key held: %q %v", o, err)
	}
	for _, q := range []string{
		`LOCK TABLE outbox.delivery_set_versions IN SHARE ROW EXCLUSIVE MODE`,
		`SELECT 1 FROM inbox.inbox_revision_progress FOR UPDATE`,
	} {
		tx, err := out.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, q)
		_ = tx.Rollback(ctx)
		kernelfix.WantSQLState(t, err, "42501", "outsider: "+q)
	}
}

// R-SEC-5, R-CO-3: observe_revision now serializes first observations of an aggregate on its
// progress row: two transactions observing revision 1 of a new aggregate at once - one applies,
// the other waits and then sees a duplicate; a gap observed first leaves progress at 0 and
// revision 1 then applies.
func TestObserveRevisionSerializesOnTheProgressRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	a := testdb.Conn(t, dsn, "outbox_consumer")
	b := testdb.Conn(t, dsn, "outbox_consumer")
	txA, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := pgcall.ObserveRevision(ctx, txA, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-race", AggregateRevision: 1})
	if err != nil || oa != pgcall.RevisionApply {
		t.Fatalf("A: %q %v", oa, err)
	}
	var wg sync.WaitGroup
	var ob string
	var errB error
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		close(started)
		ob, errB = pgcall.ObserveRevision(ctx, b, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-race", AggregateRevision: 1})
	}()
	<-started
	admin := testdb.Conn(t, dsn, "")
	// barrier: B is waiting on A's uncommitted progress row (a lock wait, not a sleep)
	deadline := time.Now().Add(10 * time.Second)
	for consumerfix.Count(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%observe_revision%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("B never waited for A")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if errB != nil || ob != pgcall.RevisionDuplicate {
		t.Fatalf("B after A committed: %q %v", ob, errB)
	}
	if o, err := pgcall.ObserveRevision(ctx, a, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-gap", AggregateRevision: 3}); err != nil || o != pgcall.RevisionGap {
		t.Fatalf("gap first: %q %v", o, err)
	}
	if n := consumerfix.Count(t, admin, `SELECT last_revision FROM inbox.inbox_revision_progress WHERE aggregate_id = 'agg-gap'`); n != 0 {
		t.Fatalf("progress after a gap = %d, want 0", n)
	}
	if o, err := pgcall.ObserveRevision(ctx, a, pgcall.ObserveRevisionParams{ConsumerName: consumerfix.Metering, AggregateID: "agg-gap", AggregateRevision: 1}); err != nil || o != pgcall.RevisionApply {
		t.Fatalf("revision 1 after the gap: %q %v", o, err)
	}
}

// R-SEC-5 (finding 3): canonicalization input is bounded - a member name longer than 1024
// characters or a document larger than max_payload_bytes is OB201 in jcs_canonicalize and
// jcs_sha256, and the append hot path (caller's canonical text) refuses exactly what the slow
// path refuses; record_receipt refuses a receipt over 64 KiB (OB002). A 1024-character name of
// U+FFFF (the characters whose sort key used to be built byte by byte) is accepted and sorted in
// UTF-16 order after a supplementary character.
func TestCanonicalizationInputBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	prod := testdb.Conn(t, dsn, "outbox_producer")
	testfix.ActivateReference(t, admin)

	long := strings.Repeat("\uffff", 1025)
	ok := strings.Repeat("\uffff", 1024)
	for _, f := range []string{"jcs_canonicalize", "jcs_sha256"} {
		_, err := prod.Exec(ctx, `SELECT outbox.`+f+`(json_build_object($1::text, 1)::json)`, long)
		kernelfix.WantSQLState(t, err, "OB201", f+" with a 1025-character name")
		_, err = prod.Exec(ctx, `SELECT outbox.`+f+`(json_build_object('a', repeat('x', 1048577))::json)`)
		kernelfix.WantSQLState(t, err, "OB201", f+" with a document over max_payload_bytes")
	}
	var got string
	if err := prod.QueryRow(ctx, `SELECT outbox.jcs_canonicalize(json_build_object($1::text, 1, U&'\+01F600', 2)::json)`, ok).Scan(&got); err != nil {
		t.Fatalf("1024-character name: %v", err)
	}
	if want := `{"😀":2,"` + ok + `":1}`; got != want {
		t.Fatalf("UTF-16 order: got %.40q…", got)
	}

	env := testfix.Envelope("execution.attempt-eligibility.finalized@1", "1", "agg-bounds", 1)
	env["payload"].(map[string]any)[long] = 1
	raw, _ := json.Marshal(env)
	_, err := pgcall.AppendEvent(ctx, prod, pgcall.AppendParams{Event: raw})
	kernelfix.WantSQLState(t, err, "OB201", "append_event with a 1025-character member name")
	// hot path: the caller claims the text is canonical (it is, by RFC 8785's rules) - refused the same way
	// Go's encoder writes this document canonically (ASCII names sorted bytewise, the long name
	// of U+FFFF last either way, no floats): the database's canonicalizer cannot, it is over the bound
	cb, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	canonical := string(cb)
	_, err = prod.Exec(ctx, `SELECT * FROM outbox.append_event($1::json, $1::text, encode(sha256(convert_to($1::text, 'UTF8')), 'hex'))`, canonical)
	if st := pgcall.SQLState(err); st != "OB201" && st != "OB105" {
		t.Fatalf("hot-path append with a 1025-character name: want OB201/OB105, got %v", err)
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.outbox_events`); n != 0 {
		t.Fatalf("refused appends wrote %d events", n)
	}

	cons := testdb.Conn(t, dsn, "outbox_consumer")
	renv, _, doc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": strings.Repeat("y", 70000)})
	_, err = consumerfix.Record(ctx, cons, consumerfix.Metering, "", 0, renv, doc.Receipt)
	kernelfix.WantSQLState(t, err, "OB002", "record_receipt with a 70 kB receipt")
}

// R-SEC-5 (finding 8), D-5: retry policies are bounded - base delay at most 1 hour, cap at most
// 1 day, multiplier 1..10 - so no policy parks a delivery for years or overflows the backoff.
func TestRetryPolicyBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	admin := testdb.Conn(t, dsn, "")
	before := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.outbox_retry_policy_history`)
	for _, args := range []string{
		`'1000 years', 1, '1000 years', 0, 20`,
		`'2 hours', 2, '1 day', 0, 20`,
		`'1 second', 2, '2 days', 0, 20`,
		`'1 second', 11, '1 hour', 0, 20`,
		`'1 second', 2, '1 hour', 0, 1001`,
	} {
		_, err := reg.Exec(ctx, `SELECT outbox.set_retry_policy('core_operations', `+args+`)`)
		kernelfix.WantSQLState(t, err, "22023", "set_retry_policy("+args+")")
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM outbox.outbox_retry_policy_history`); n != before {
		t.Fatalf("refused policies changed the history: %d -> %d", before, n)
	}
	if _, err := reg.Exec(ctx, `SELECT outbox.set_retry_policy('core_operations', '1 hour', 10, '1 day', 0.5, 1000)`); err != nil {
		t.Fatalf("the largest allowed policy: %v", err)
	}
	// the owner cannot bypass the function either (table constraint)
	_, err := testdb.Conn(t, dsn, "outbox_owner").Exec(ctx, `UPDATE outbox.outbox_retry_policies SET max_delay = '30 days', base_delay = '1 day'`)
	kernelfix.WantSQLState(t, err, "23514", "owner writing an unbounded policy")
}

// R-SEC-5 (finding 7), R-SEC-3, R-AK-4: TRUNCATE (and DELETE) of the registry and kernel
// reference tables is refused for the owner (OB202), like DELETE always was; and a forged
// publishing setting cannot publish an event whose deliveries are not all acknowledged - the
// publication trigger checks the rule itself.
func TestOwnerCannotTruncateRegistryOrForgePublication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	owner := testdb.Conn(t, dsn, "outbox_owner")
	for _, tbl := range []string{"outbox.delivery_set_versions", "outbox.delivery_set_members", "outbox.delivery_set_applicable_events",
		"outbox.delivery_destinations", "outbox.receipt_kinds", "outbox.receipt_kind_members", "outbox.envelope_refinements",
		"outbox.error_codes", "outbox.kernel_settings", "inbox.consumer_roles"} {
		_, err := owner.Exec(ctx, `TRUNCATE `+tbl+` CASCADE`)
		kernelfix.WantSQLState(t, err, "OB202", "TRUNCATE "+tbl)
	}
	for _, q := range []string{`DELETE FROM outbox.kernel_settings`, `DELETE FROM outbox.receipt_kind_members`,
		`UPDATE outbox.error_codes SET retryable = NOT retryable`, `DELETE FROM outbox.envelope_refinements`} {
		_, err := owner.Exec(ctx, q)
		kernelfix.WantSQLState(t, err, "OB202", q)
	}
	if _, err := owner.Exec(ctx, `UPDATE outbox.kernel_settings SET value = value WHERE name = 'max_payload_bytes'`); err != nil {
		t.Fatalf("tuning a kernel setting stays allowed: %v", err)
	}

	eventID := testfix.Append(t, testdb.Conn(t, dsn, "outbox_producer"),
		testfix.Envelope("execution.attempt-eligibility.finalized@1", "1", "agg-pub", 1))
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT set_config('pgoutbox.publishing', 'on', true), set_config('pgoutbox.publishing_event', $1, true)`, eventID); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO outbox.outbox_publications (event_id, published_at) VALUES ($1, now())`, eventID)
	kernelfix.WantSQLState(t, err, "OB202", "forged publication of an unacknowledged event")
}

// R-CL-6, R-CL-7, R-SEC-5 (finding 5): a per_aggregate chain whose head is leased costs a claim
// nothing - revisions 2..N wait parked (available_at = infinity) outside the claim's index range,
// so an empty claim reads at most a handful of index entries however long the chain (counted
// with the index statistics, not timed). Acknowledging the head releases exactly the next
// revision; quarantining it releases the one after; order holds throughout.
func TestPerAggregateBlockedChainsCostNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dxOrderedSetup(t)
	prod := testdb.Conn(t, b.Dsn, "outbox_producer")
	const n = 400
	envs := make([]map[string]any, n)
	ids := make([]string, n)
	for i := range envs {
		envs[i] = testfix.Envelope(kernelfix.Metering, "1", "agg-chain", int64(i+1))
		ids[i] = envs[i]["eventId"].(string)
	}
	raw, _ := json.Marshal(envs[:n/2])
	if _, err := pgcall.AppendEvents(ctx, prod, pgcall.AppendEventsParams{Events: raw}); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs[n/2:] { // one by one too: parked behind the open head in the table
		testfix.Append(t, prod, e)
	}
	parked := func() int {
		return kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM outbox.outbox_deliveries WHERE destination = $1 AND available_at = 'infinity'`, dxDestOrdered)
	}
	if p := parked(); p != n-1 {
		t.Fatalf("parked = %d, want %d", p, n-1)
	}
	head := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered)
	if len(head) != 1 || head[0].EventID != ids[0] {
		t.Fatalf("claim under a chain returned %d rows, want revision 1 only", len(head))
	}

	// an empty claim with the head leased and 399 revisions blocked: index entries read
	readEntries := func() int {
		return kernelfix.QueryInt(t, b.Admin, `SELECT (pg_stat_force_next_flush() IS NULL)::int * 0 + coalesce(sum(idx_tup_read), 0)::int
		                            FROM pg_stat_user_indexes WHERE schemaname = 'outbox' AND relname = 'outbox_deliveries'
		                             AND indexrelname IN ('outbox_deliveries_claimable', 'outbox_deliveries_open')`)
	}
	// statistics as autovacuum would have them (plans chosen on an empty table's statistics are
	// not what a running system uses)
	if _, err := b.Admin.Exec(ctx, `ANALYZE outbox.outbox_deliveries`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*pgx.Conn{prod, b.Admin, b.Disp} { // every earlier reader's counts are in
		if _, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
	}
	before := readEntries()
	if got := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered); len(got) != 0 {
		t.Fatalf("empty claim returned %d rows", len(got))
	}
	if _, err := b.Disp.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	if read := readEntries() - before; read > 20 {
		t.Fatalf("an empty claim read %d index entries under a chain of %d blocked revisions; want O(batch)", read, n-1)
	}

	kernelfix.Ack(t, b.Disp, head[0])
	next := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered)
	if len(next) != 1 || next[0].EventID != ids[1] {
		t.Fatalf("after acking revision 1 the claim returned %d rows, want revision 2", len(next))
	}
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(next[0]), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	third := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered)
	if len(third) != 1 || third[0].EventID != ids[2] {
		t.Fatalf("after quarantining revision 2 the claim returned %d rows, want revision 3", len(third))
	}
	if p := parked(); p != n-3 {
		t.Fatalf("parked = %d, want %d", p, n-3)
	}
}

// R-CL-7, R-SEC-5: parking never strands a delivery. An append parks revision 2 behind a leased
// revision 1 while the dispatcher acknowledges revision 1 concurrently, in both orders (barriers
// on the real lock waits): revision 2 ends claimable either way.
func TestParkedRevisionReleasedUnderConcurrentAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, appendFirst := range []bool{true, false} {
		b := dxOrderedSetup(t)
		prod := testdb.Conn(t, b.Dsn, "outbox_producer")
		agg := fmt.Sprintf("agg-race-%v", appendFirst)
		testfix.Append(t, prod, testfix.Envelope(kernelfix.Metering, "1", agg, 1))
		head := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered)
		if len(head) != 1 {
			t.Fatalf("claim head: %d rows", len(head))
		}
		ack, rc := kernelfix.ValidAck(t, head[0])
		env2 := testfix.Envelope(kernelfix.Metering, "1", agg, 2)
		raw2, _ := json.Marshal(env2)

		first, second := prod, b.Disp
		if !appendFirst {
			first, second = b.Disp, prod
		}
		tx1, err := first.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		do := func(db pgcall.DBTX, isAppend bool) error {
			if isAppend {
				_, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: raw2})
				return err
			}
			_, err := pgcall.AckDelivery(ctx, db, kernelfix.FenceOf(head[0]), ack, rc)
			return err
		}
		if err := do(tx1, appendFirst); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- do(second, !appendFirst) }()
		deadline := time.Now().Add(10 * time.Second)
		for kernelfix.QueryInt(t, b.Admin, `SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the second transaction never waited for the first")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := tx1.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("second (append first = %v): %v", appendFirst, err)
		}
		got := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, dxDestOrdered)
		if len(got) != 1 || got[0].EventID != env2["eventId"] {
			t.Fatalf("append first = %v: revision 2 not claimable after revision 1 was acknowledged (%d rows)", appendFirst, len(got))
		}
	}
}

// R-SEC-5 (finding 6): wake-ups are coalesced. Any login may NOTIFY outbox_delivery; a burst of
// 600 notifications for a destination this dispatcher serves drives at most one claim per
// wake_coalesce (plus one), not one claim per notification.
func TestWakeUpBurstIsCoalesced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dispatcherfix.Setup(t)
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("sh-wake", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	cfg.PollInterval = 10 * time.Minute
	cfg.WakeCoalesce = 100 * time.Millisecond
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})
	notifyClaims := func() float64 { return promtest.ToFloat64(r.M.ClaimCalls.WithLabelValues("notify")) }
	// barrier: the dispatcher is listening (the wake-up it gives itself on LISTEN is a claim)
	dispatcherfix.Eventually(t, "listening", func() bool {
		return notifyClaims() >= 1
	})
	base := notifyClaims()
	start := time.Now()
	for i := 0; i < 600; i++ {
		if _, err := db.Admin.Exec(ctx, `SELECT pg_notify('outbox_delivery', $1)`, dispatcherfix.MeteringDest); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // let the last coalesced claim run (not an assertion on time)
	elapsed := time.Since(start)
	got := notifyClaims() - base
	limit := float64(elapsed/cfg.WakeCoalesce) + 2
	if got > limit {
		t.Fatalf("600 notifications in %v drove %.0f claims; want at most %.0f (one per %v)", elapsed, got, limit, cfg.WakeCoalesce)
	}
	if got < 1 {
		t.Fatalf("600 notifications drove no claim at all")
	}
}

// R-AK-1a, R-CO-1: the consumer kit's inbox accepts a receipt ref as long as the ack rule does
// (500 characters) and refuses a longer one (OB002), so a ref the published schema allows is
// never lost between the inbox and the ack.
func TestRecordReceiptRefLimitMatchesAckRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cons := testdb.Conn(t, testdb.URL(t), "outbox_consumer")
	for _, n := range []int{500, 501} {
		env, _, doc := consumerfix.EnvelopeAndReceipt(t, receipt.Fields{"consumerOutcome": "ref"})
		var m map[string]any
		if err := json.Unmarshal(doc.Receipt, &m); err != nil {
			t.Fatal(err)
		}
		m["meteringInputProcessorConsumerReceiptRef"] = strings.Repeat("r", n)
		rc, _ := json.Marshal(m)
		_, err := consumerfix.Record(ctx, cons, consumerfix.Metering, "", 0, env, rc)
		if n == 500 && err != nil {
			t.Fatalf("a 500-character ref: %v", err)
		}
		if n == 501 {
			kernelfix.WantSQLState(t, err, "OB002", "a 501-character ref")
		}
	}
}
