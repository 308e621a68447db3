package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// appendCalls appends n events with producer.AppendMany (the D-2 hot path) in one transaction
// of the superuser connection as outbox_producer, fires the deferred delivery-set proof
// (SET CONSTRAINTS ALL IMMEDIATE runs what COMMIT would run), and returns the user-function
// calls of the transaction (pg_stat_xact_user_functions, track_functions = all) by function.
// The view also holds calls of earlier transactions of the session not yet flushed (at most once
// a second, between transactions): the counts are taken as the difference over the transaction.
func appendCalls(t *testing.T, b appendBundle, n int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{"SET LOCAL track_functions = 'all'", "SET LOCAL ROLE outbox_producer"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	before := xactCalls(t, tx)
	evs := make([]producer.Event, n)
	for i := range evs {
		evs[i] = sampleEvent()
		evs[i].AggregateID = fmt.Sprintf("hp-%d-%d", n, i)
	}
	rs, err := producer.AppendMany(ctx, tx, evs)
	if err != nil || len(rs) != n {
		t.Fatalf("append %d: %v (%d rows)", n, err, len(rs))
	}
	for _, s := range []string{"SET CONSTRAINTS ALL IMMEDIATE", "RESET ROLE"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	out := xactCalls(t, tx)
	for f, c := range before {
		if out[f] -= c; out[f] == 0 {
			delete(out, f)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return out
}

func xactCalls(t *testing.T, tx pgx.Tx) map[string]int64 {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT schemaname || '.' || funcname, calls FROM pg_stat_xact_user_functions`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var name string
	var calls int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &calls}, func() error { out[name] += calls; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// HP-1, R-AK-9, R-AP-5: on the success path of append_events (producer library, D-2 hot path)
// the number of PL/pgSQL/SQL function calls - trigger functions and the deferred proof of the
// delivery sets included - is a small constant, the same for 10 and for 100 envelopes; no
// per-element rule function runs.
func TestHotPathAppendFunctionCallsConstant(t *testing.T) {
	t.Parallel()
	b := appendSetup(t)
	total := func(m map[string]int64) (n int64) {
		for _, c := range m {
			n += c
		}
		return n
	}
	c10, c100 := appendCalls(t, b, 10), appendCalls(t, b, 100)
	t.Logf("function calls: 10 envelopes %d %v; 100 envelopes %d %v", total(c10), c10, total(c100), c100)
	if total(c10) != total(c100) {
		t.Fatalf("function calls depend on the batch size: %d for 10, %d for 100 (%v / %v)", total(c10), total(c100), c10, c100)
	}
	if total(c100) > 8 {
		t.Fatalf("%d function calls per append_events call, want a small constant (<= 8): %v", total(c100), c100)
	}
	for _, f := range []string{"outbox._append_validate", "outbox._jcs_text_problem", "outbox.jcs_canonicalize", "outbox._sha256_hex"} {
		if c100[f] != 0 {
			t.Fatalf("%s called %d times on the hot path", f, c100[f])
		}
	}
	if c100["outbox.append_events"] != 1 || c100["outbox.tg_outbox_append_proofs__check"] < 1 {
		t.Fatalf("unexpected calls: %v", c100)
	}
}

// hotDoc returns a canonical EventEnvelope@1 text whose payload text is exactly payload (which
// need not be canonical), built from a canonical envelope around a marker.
func hotDoc(t *testing.T, payload string) string {
	t.Helper()
	m := testfix.Envelope("execution.run-finalization.closed@1", "1", "agg-hp", 1)
	m["payload"] = map[string]any{"m": "MARK"}
	doc, _ := json.Marshal(m)
	c, err := canon.Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(c)
	if !strings.Contains(s, `{"m":"MARK"}`) {
		t.Fatalf("no marker in %s", s)
	}
	return strings.Replace(s, `{"m":"MARK"}`, payload, 1)
}

// HP-1, HP-2, D-2: an element the cheap predicate does not accept goes to the full per-element
// rule (outbox._append_validate), so append_events raises exactly the SQLSTATE that rule raises
// for it (and the hot path accepts, through that rule, what the predicate cannot decide).
func TestHotPathAppendRejectLikeFullRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	type tc struct {
		name, text, digest, want string
	}
	var cases []tc
	add := func(name, text, want string) {
		cases = append(cases, tc{name, text, canon.SumHex([]byte(text)), want})
	}
	add("fraction", hotDoc(t, `{"x":1.5}`), "OB201")
	add("exponent", hotDoc(t, `{"x":1E2}`), "OB201")
	add("negative zero", hotDoc(t, `{"x":-0}`), "OB201")
	add("unsafe integer", hotDoc(t, `{"x":9007199254740992}`), "OB201")
	add("member order", hotDoc(t, `{"b":1,"a":2}`), "OB201")
	add("duplicate member", hotDoc(t, `{"a":1,"a":1}`), "OB201")
	add("escaped letter", hotDoc(t, `{"a":"\u00e9"}`), "OB201")
	add("nested fraction", hotDoc(t, `{"a":[{"b":[0.5]}]}`), "OB201")
	add("unknown field", strings.Replace(hotDoc(t, `{}`), `"tenant":`, `"tenantX":1,"tenant":`, 1), "OB105")
	add("unknown tenant field", strings.Replace(hotDoc(t, `{}`), `"tenantId":`, `"tenantFoo":"x","tenantId":`, 1), "OB105")
	add("aggregateRevision string", strings.Replace(hotDoc(t, `{}`), `"aggregateRevision":1`, `"aggregateRevision":"1"`, 1), "OB105")
	{
		d := hotDoc(t, `{}`)
		i := strings.Index(d, `"occurredAt":"`) + len(`"occurredAt":"`)
		add("february 30", d[:i]+"2026-02-30T00:00:00.000000Z"+d[i+27:], "OB105")
		add("hour 24", d[:i]+"2026-02-10T24:00:00.000000Z"+d[i+27:], "OB105")
	}
	good := hotDoc(t, `{}`)
	cases = append(cases, tc{"digest differs", good, strings.Repeat("0", 64), "OB105"})
	// not decided by the predicate, accepted by the full rule
	add("non-ASCII member name", hotDoc(t, `{"z":2,"é":1}`), "")
	add("payload nested 6 levels", hotDoc(t, `{"a":{"b":{"c":{"d":{"e":{"f":1}}}}}}`), "")

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// What the full rule says about this element on its own (as the owner).
			_, ferr := b.admin.Exec(ctx, `SELECT * FROM outbox._append_validate($1::json, $2, $3, 1048576, '')`, c.text, c.text, c.digest)
			full := pgcall.SQLState(ferr)
			if full != c.want {
				t.Fatalf("full rule: %q (%v), the case expects %q", full, ferr, c.want)
			}
			ctx := context.Background()
			tx, err := b.producer.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			ct, dg := c.text, c.digest
			// with a valid element before it: the batch is not judged as a whole
			first, firstDigest, err := canon.CanonicalizeDigest([]byte(hotDoc(t, `{"n":1}`)))
			if err != nil {
				t.Fatal(err)
			}
			fs := string(first)
			rs, err := pgcall.AppendEvents(ctx, tx, pgcall.AppendEventsParams{
				Events:          json.RawMessage("[" + fs + "," + ct + "]"),
				CanonicalTexts:  []*string{&fs, &ct},
				EnvelopeSHA256s: []*string{&firstDigest, &dg},
			})
			if got := pgcall.SQLState(err); got != c.want {
				t.Fatalf("append_events: %q (%v), the full rule: %q", got, err, c.want)
			}
			if c.want == "" {
				if len(rs) != 2 || rs[1].EnvelopeSHA256 != c.digest {
					t.Fatalf("rows %+v, want the submitted digest %s", rs, c.digest)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("commit: %v", err)
				}
			}
		})
	}
}
