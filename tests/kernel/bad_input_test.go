package kernel

// Bad input at every entrance (issue "Proof under fire", item 5): each case gets its stable
// SQLSTATE or HTTP status AND a proof that nothing changed (a digest of every kernel and inbox
// table before and after). Cases already proven elsewhere are referenced, so the suite reads as
// one list:
//
//	entrance / case                                           | answer        | where
//	----------------------------------------------------------|---------------|---------------------------------------------
//	append_event: text that is not JSON (11 forms)            | 22P02         | TestBadInputAppendEvent/malformed
//	append_event: invalid UTF-8 / \u0000 escape               | 22021 / 22P05 | TestBadInputAppendEvent/encoding
//	append_event: duplicate key (top level)                   | OB201         | TestAppendEventEnvelopeRules
//	append_event: duplicate key (tenant, payload, nested)     | OB201         | TestBadInputAppendEvent/duplicate_keys
//	append_event: float / unsafe integer in payload           | OB201         | TestAppendEventEnvelopeRules
//	append_event: non-integer numbers (revision / payload)    | OB105 / OB201 | TestBadInputAppendEvent/non_integer
//	append_event: integer-valued spellings (1.0, 1e3, -0)     | accepted, canonicalized | TestBadInputAppendEvent/non_integer
//	append_event: envelope rules (unknown/missing fields ...) | OB105         | TestAppendEventEnvelopeRules
//	append_event: oversized payload (lowered limit)           | OB105         | TestAppendEventPayloadLimit
//	append_event: oversized payload (default 1 MiB limit)     | OB105         | TestBadInputAppendEvent/oversized
//	append_event: unknown event type / schema version         | OB103         | TestBadInputAppendEvent/unknown_event_type, TestAppendEventNotApplicable
//	append_event: hot path, digest or canonical text forged   | OB105         | TestAppendEventHotPath, TestBadInputAppendEvent/hot_path
//	append_event: SQL-special characters in every text field  | verbatim / OB105 | TestBadInputSpecialCharactersAppendEvent
//	register_delivery_set: not JSON / duplicate key / float   | 22P02 / OB101 / OB101 | TestBadInputRegistry
//	register_delivery_set: structural rules                   | OB101         | TestRegisterDeliverySetRejections
//	register_delivery_set: SQL-special source_release         | OB101 / 22023 | TestBadInputRegistry
//	register_destination: SQL-special characters, bad values  | OB101         | TestBadInputRegistry, TestRegisterDestination
//	ack_delivery: forged ack (digest, kind, projection, ...)  | OB002         | TestAckDeliveryRejectsMismatches (40 mutations, state unchanged)
//	ack_delivery: not JSON                                    | 22P02         | TestBadInputAck/not_json
//	dispatcher: forged ack (envelope digest) → invalid_ack    | retry         | TestDispatcherMalformedAckRetriedNeverAcknowledged
//	dispatcher: forged ack (kind, projection) → invalid_ack   | retry         | TestBadInputDispatcherForgedAcks
//	ack replayed after success                                | OB001         | TestAckDeliveryRecordsAck, TestBadInputAck/replayed
//	ack of an earlier attempt after lease expiry + re-claim   | OB001         | TestFencingOldWorkerAfterLeaseExpiry
//	ack of an earlier attempt after retry + re-claim          | OB001         | TestBadInputAck/replayed
//	tokens/attempts of other deliveries                       | OB001         | TestFencingWrongFence, TestBadInputAck/other_delivery
//	another delivery's (valid) ack under this fence           | OB002         | TestBadInputAck/other_delivery
//	claim worker name, SQL-special characters                 | 22023         | TestBadInputDispatchTextFields
//	retry_delivery error_ref, SQL-special characters          | stored sanitized, verbatim otherwise | TestBadInputDispatchTextFields
//	retry_delivery error_code / quarantine reason, special    | 22023         | TestBadInputDispatchTextFields
//	record_receipt consumer/projection name, special          | 22023         | TestBadInputRecordReceipt
//	consumer HTTP: not JSON / duplicate key / float body      | 422 envelope_invalid | TestBadInputConsumerHTTP
//	consumer HTTP: oversized body                             | 413           | TestBadInputConsumerHTTP
//	consumer HTTP: special characters in headers              | 4xx (503 consumer_unavailable when misrouted), never 500 | TestBadInputConsumerHTTP
//	consumer HTTP: bad signature / missing header / digest    | 401 / 400 / 422 | TestConsumerHTTPHandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// biTables are every table an entrance could change.
var biTables = []string{
	"outbox.outbox_events", "outbox.outbox_deliveries", "outbox.outbox_delivery_attempt_starts",
	"outbox.outbox_delivery_attempt_finishes", "outbox.outbox_quarantine", "outbox.delivery_destinations",
	"outbox.delivery_set_versions", "outbox.delivery_set_members", "outbox.delivery_set_applicable_events",
	"outbox.outbox_retry_policies", "inbox.inbox_receipts", "inbox.inbox_revision_progress", "inbox.inbox_revision_gaps",
}

// biSnapshot is a digest of the content of every table of biTables (row count and md5 of the
// sorted rows): equal snapshots mean nothing changed.
func biSnapshot(t *testing.T, admin pgcall.DBTX) string {
	t.Helper()
	var b strings.Builder
	for _, tbl := range biTables {
		var s string
		if err := admin.QueryRow(context.Background(), `SELECT count(*)::text || ':' || COALESCE(md5(string_agg(x::text, '|' ORDER BY x::text)), '')
			FROM `+tbl+` AS x`).Scan(&s); err != nil {
			t.Fatalf("snapshot %s: %v", tbl, err)
		}
		b.WriteString(tbl + "=" + s + ";")
	}
	return b.String()
}

// biUnchanged runs f and fails unless the tables are exactly as before.
func biUnchanged(t *testing.T, admin pgcall.DBTX, f func()) {
	t.Helper()
	before := biSnapshot(t, admin)
	f()
	if after := biSnapshot(t, admin); after != before {
		t.Fatalf("state changed by a rejected input:\nbefore %s\nafter  %s", before, after)
	}
}

func biWantState(t *testing.T, err error, codes ...string) {
	t.Helper()
	got := pgcall.SQLState(err)
	for _, c := range codes {
		if got == c {
			return
		}
	}
	t.Fatalf("got %v (SQLSTATE %q), want one of %v", err, got, codes)
}

// biNasty are SQL-special and otherwise hostile strings for every text field.
var biNasty = map[string]string{
	"single quote injection": `x'; DROP TABLE outbox.outbox_events; --`,
	"paren injection":        `Robert'); DELETE FROM outbox.outbox_deliveries WHERE ('1'='1`,
	"double quotes":          `say "hello" \"escaped\"`,
	"backslashes":            `C:\path\to\n\t\\share\u0041`,
	"format verbs":           `%s %d %x %n %% %L %I $1 $$ $fn$`,
	"comment and semicolons": `/* c */ -- ; ;; SELECT 1;`,
	"json fragment":          `{"a":1}, "eventId": "x"`,
	"control adjacent":       "a\u0001b\u001fc\u007fd",
	"line separators":        "l1\u2028l2\u2029\r\n",
	"bom and zero width":     "\ufeffzero\u200bwidth\u200d",
	"emoji":                  "🚀 👩‍👩‍👧 🏳️‍🌈",
	"nfd accent":             "e\u0301te\u0301",
	"very long":              strings.Repeat("long-Ω-'\"\\-", 20000),
}

// biNUL is a real NUL character: PostgreSQL text cannot hold it.
const biNUL = "before\x00after"

// T-1, R-AP-3, R-AP-5, D-2: append_event refuses malformed documents with stable SQLSTATEs and
// writes nothing.
func TestBadInputAppendEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	raw := func(doc string) error {
		_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(doc)})
		return err
	}
	valid, _ := json.Marshal(testfix.Envelope("billing.finalization.committed@1", "1", "agg-bad", 1))
	body := string(valid[1 : len(valid)-1]) // the members, without braces

	t.Run("malformed", func(t *testing.T) {
		for name, doc := range map[string]string{
			"truncated":         string(valid[:len(valid)/2]),
			"not json":          "hello",
			"single quotes":     `{'eventId': 'x'}`,
			"trailing garbage":  string(valid) + " {}",
			"trailing comma":    "{" + body + ",}",
			"unquoted key":      "{" + body + ", payload2: 1}",
			"empty":             "",
			"bare comma":        ",",
			"unterminated str":  `{"eventId": "abc`,
			"bad escape":        `{"eventId": "\x"}`,
			"lone surrogate \\": `{"eventId": "\ud800"}`,
		} {
			t.Run(name, func(t *testing.T) {
				biUnchanged(t, b.admin, func() { biWantState(t, raw(doc), "22P02") })
			})
		}
	})
	t.Run("encoding", func(t *testing.T) {
		// Invalid UTF-8 never reaches a function: the server refuses the text (22021).
		bad := strings.Replace(string(valid), `"agg-bad"`, "\"agg-\xff\xfe\"", 1)
		biUnchanged(t, b.admin, func() { biWantState(t, raw(bad), "22021") })
		// A \u0000 escape inside a string is valid json text but no PostgreSQL text can hold it.
		nul := strings.Replace(string(valid), `"agg-bad"`, `"agg-\u0000"`, 1)
		biUnchanged(t, b.admin, func() { biWantState(t, raw(nul), "22P05") })
	})
	t.Run("duplicate_keys", func(t *testing.T) {
		for name, edit := range map[string]func(m map[string]any) string{
			"tenant": func(m map[string]any) string {
				s, _ := json.Marshal(m)
				return strings.Replace(string(s), `"tenant":{`, `"tenant":{"tenantId":"evil",`, 1)
			},
			"payload": func(m map[string]any) string {
				m["payload"] = map[string]any{"amount": "1"}
				s, _ := json.Marshal(m)
				return strings.Replace(string(s), `"payload":{`, `"payload":{"amount":"2",`, 1)
			},
			"nested payload": func(m map[string]any) string {
				m["payload"] = map[string]any{"x": map[string]any{"k": "1"}}
				s, _ := json.Marshal(m)
				return strings.Replace(string(s), `{"k":"1"}`, `{"k":"1","k":"1"}`, 1)
			},
			"same value twice": func(m map[string]any) string {
				s, _ := json.Marshal(m)
				return `{"eventType":"billing.finalization.committed@1",` + string(s[1:])
			},
		} {
			t.Run(name, func(t *testing.T) {
				doc := edit(testfix.Envelope("billing.finalization.committed@1", "1", "agg-dup", 1))
				biUnchanged(t, b.admin, func() { biWantState(t, raw(doc), "OB201") })
			})
		}
	})
	t.Run("non_integer", func(t *testing.T) {
		// True non-integers and unsafe integers are refused; integer-valued spellings (1.0, 1e0,
		// 1e3, -0) are the same JSON number as their integer (RFC 8785) and are accepted and
		// canonicalized — proved by the database deriving the digest the Go canonicalizer derives.
		for name, c := range map[string]struct{ from, to, state string }{
			"revision 1.5":                 {`"aggregateRevision":1`, `"aggregateRevision":1.5`, "OB105"},
			"revision huge":                {`"aggregateRevision":1`, `"aggregateRevision":99999999999999999999`, "OB105"},
			"revision negative":            {`"aggregateRevision":1`, `"aggregateRevision":-1`, "OB105"},
			"revision 1e400":               {`"aggregateRevision":1`, `"aggregateRevision":1e400`, "OB105"},
			"payload fraction":             {`"payload":{}`, `"payload":{"n":0.1}`, "OB201"},
			"payload 2^53+1":               {`"payload":{}`, `"payload":{"n":9007199254740993}`, "OB201"},
			"payload -2^53-1":              {`"payload":{}`, `"payload":{"n":-9007199254740993}`, "OB201"},
			"payload 1e400":                {`"payload":{}`, `"payload":{"n":1e400}`, "OB201"},
			"integer-valued revision 1.0":  {`"aggregateRevision":1`, `"aggregateRevision":1.0`, ""},
			"integer-valued revision 1e0":  {`"aggregateRevision":1`, `"aggregateRevision":1e0`, ""},
			"integer-valued payload 1e3":   {`"payload":{}`, `"payload":{"n":1e3}`, ""},
			"integer-valued payload -0":    {`"payload":{}`, `"payload":{"n":-0}`, ""},
			"integer-valued payload 2.0E1": {`"payload":{}`, `"payload":{"n":2.0E1}`, ""},
		} {
			t.Run(name, func(t *testing.T) {
				m := testfix.Envelope("billing.finalization.committed@1", "1", "agg-num-"+testfix.NewUUID()[:8], 1)
				m["payload"] = map[string]any{}
				s, _ := json.Marshal(m)
				if !strings.Contains(string(s), c.from) {
					t.Fatalf("fixture lacks %s: %s", c.from, s)
				}
				doc := strings.Replace(string(s), c.from, c.to, 1)
				if c.state != "" {
					biUnchanged(t, b.admin, func() { biWantState(t, raw(doc), c.state) })
					return
				}
				res, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: json.RawMessage(doc)})
				if err != nil {
					t.Fatalf("integer-valued number refused: %v", err)
				}
				cn, err := canon.Canonicalize([]byte(doc))
				if err != nil {
					t.Fatalf("Go canonicalizer refuses what the database accepted: %v", err)
				}
				if sum, _ := canon.SHA256Hex(cn); sum != res.EnvelopeSHA256 {
					t.Fatalf("database digest %s, Go digest %s", res.EnvelopeSHA256, sum)
				}
				if strings.Contains(string(cn), c.to) {
					t.Fatalf("canonical text keeps the non-canonical spelling: %s", cn)
				}
			})
		}
	})
	t.Run("oversized", func(t *testing.T) {
		// The default limit (outbox.kernel_settings max_payload_bytes = 1 MiB).
		m := testfix.Envelope("billing.finalization.committed@1", "1", "agg-big", 1)
		m["payload"] = map[string]any{"blob": strings.Repeat("x", 1<<20+1)}
		biUnchanged(t, b.admin, func() {
			_, err := appendJSON(ctx, b.producer, m)
			biWantState(t, err, "OB105")
		})
		// Many small keys instead of one big string.
		big := map[string]any{}
		for i := 0; i < 70000; i++ {
			big[fmt.Sprintf("k%06d", i)] = "vvvvvvvv"
		}
		m["payload"] = big
		biUnchanged(t, b.admin, func() {
			_, err := appendJSON(ctx, b.producer, m)
			biWantState(t, err, "OB105")
		})
	})
	t.Run("unknown_event_type", func(t *testing.T) {
		for name, pair := range map[string][2]string{
			"unknown type":             {"no.such.event@1", "1"},
			"known type, other schema": {"billing.finalization.committed@1", "2"},
			"case changed":             {"Billing.Finalization.Committed@1", "1"},
			"prefix only":              {"billing.finalization", "1"},
			"trailing space":           {"billing.finalization.committed@1 ", "1"},
			"injection":                {"x'; DROP TABLE outbox.outbox_events; --", "1"},
		} {
			t.Run(name, func(t *testing.T) {
				biUnchanged(t, b.admin, func() {
					_, err := appendJSON(ctx, b.producer, testfix.Envelope(pair[0], pair[1], "agg-unknown", 1))
					biWantState(t, err, "OB103", "OB105")
				})
			})
		}
	})
	t.Run("hot_path", func(t *testing.T) {
		m := testfix.Envelope("billing.finalization.committed@1", "1", "agg-hot", 1)
		doc, _ := json.Marshal(m)
		c, err := canon.Canonicalize(doc)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := canon.SHA256Hex(c)
		for name, p := range map[string]struct{ text, sha string }{
			"canonical text not json":       {"{not json", sum},
			"canonical text with dup key":   {`{"a":1,"a":1}`, sum},
			"digest upper-case":             {string(c), strings.ToUpper(sum)},
			"digest injection":              {string(c), "'; DROP TABLE outbox.outbox_events; --"},
			"digest of other text":          {string(c), strings.Repeat("0", 64)},
			"canonical text of other event": {strings.Replace(string(c), "agg-hot", "agg-hoT", 1), sum},
		} {
			t.Run(name, func(t *testing.T) {
				text, sha := p.text, p.sha
				biUnchanged(t, b.admin, func() {
					_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: doc, CanonicalText: &text, EnvelopeSHA256: &sha})
					biWantState(t, err, "OB105")
				})
			})
		}
	})
}

// T-1, R-AP-3, D-2, D-3: SQL-special characters in every text field of append_event are either
// stored verbatim (proved by reading the columns back and by the database re-deriving the very
// digest the Go canonicalizer computed) or refused with OB105 (a field with a literal rule) —
// never an injection, never an internal error.
func TestBadInputSpecialCharactersAppendEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	fields := map[string]struct {
		set    func(m map[string]any, v string)
		column string // the outbox_events column holding it ("" for payload)
	}{
		"aggregateId":        {func(m map[string]any, v string) { m["aggregateId"] = v }, "aggregate_id"},
		"correlationId":      {func(m map[string]any, v string) { m["correlationId"] = v }, "correlation_id"},
		"causationId":        {func(m map[string]any, v string) { m["causationId"] = v }, "causation_id"},
		"operationId":        {func(m map[string]any, v string) { m["operationId"] = v }, "operation_id"},
		"tenant.tenantKind":  {func(m map[string]any, v string) { m["tenant"].(map[string]any)["tenantKind"] = v }, "tenant_kind"},
		"tenant.tenantId":    {func(m map[string]any, v string) { m["tenant"].(map[string]any)["tenantId"] = v }, "tenant_id"},
		"tenant.workspaceId": {func(m map[string]any, v string) { m["tenant"].(map[string]any)["workspaceId"] = v }, "workspace_id"},
		"tenant.projectId":   {func(m map[string]any, v string) { m["tenant"].(map[string]any)["projectId"] = v }, "project_id"},
		"payload value":      {func(m map[string]any, v string) { m["payload"] = map[string]any{"note": v} }, ""},
		"payload key":        {func(m map[string]any, v string) { m["payload"] = map[string]any{v: "note"} }, ""},
	}
	accepted, refused := 0, 0
	for fname, f := range fields {
		for vname, v := range biNasty {
			t.Run(fname+"/"+vname, func(t *testing.T) {
				m := testfix.Envelope("billing.finalization.committed@1", "1", "agg-special", 1)
				f.set(m, v)
				doc, _ := json.Marshal(m)
				c, cerr := canon.Canonicalize(doc)
				before := biSnapshot(t, b.admin)
				res, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: doc})
				if err != nil {
					// Refused: a clear kernel code, and nothing written.
					biWantState(t, err, "OB105", "OB201")
					t.Logf("refused: %v", err)
					if after := biSnapshot(t, b.admin); after != before {
						t.Fatal("a refused append changed state")
					}
					refused++
					return
				}
				accepted++
				if cerr != nil {
					t.Fatalf("the database accepted what the Go canonicalizer refuses: %v", cerr)
				}
				sum, _ := canon.SHA256Hex(c)
				if res.EnvelopeSHA256 != sum {
					t.Fatalf("database digest %s, Go digest %s: the stored text differs from what was sent", res.EnvelopeSHA256, sum)
				}
				if f.column != "" {
					var got string
					if err := b.admin.QueryRow(ctx, `SELECT `+f.column+` FROM outbox.outbox_events WHERE event_id = $1::uuid`, res.EventID).Scan(&got); err != nil {
						t.Fatal(err)
					}
					if got != v {
						t.Fatalf("%s stored as %q, sent %q", f.column, trunc(got), trunc(v))
					}
				} else {
					var got string
					if err := b.admin.QueryRow(ctx, `SELECT event_payload::text FROM outbox.outbox_events WHERE event_id = $1::uuid`, res.EventID).Scan(&got); err != nil {
						t.Fatal(err)
					}
					var pm map[string]string
					if err := json.Unmarshal([]byte(got), &pm); err != nil {
						t.Fatal(err)
					}
					if pm["note"] != v && pm[v] != "note" {
						t.Fatalf("payload stored as %q", trunc(got))
					}
				}
			})
		}
	}
	// A NUL character cannot be sent as text at all (pgx/PostgreSQL refuse it before any function).
	t.Run("NUL", func(t *testing.T) {
		m := testfix.Envelope("billing.finalization.committed@1", "1", "agg-nul", 1)
		m["aggregateId"] = biNUL
		doc, _ := json.Marshal(m) // JSON escapes it as \u0000
		biUnchanged(t, b.admin, func() {
			_, err := pgcall.AppendEvent(ctx, b.producer, pgcall.AppendParams{Event: doc})
			biWantState(t, err, "OB105", "OB201", "22P05")
		})
	})
	// The schema is intact and every stored digest re-verifies in the database (D-2).
	if accepted == 0 {
		t.Fatal("no special-character value was accepted: the round trip proves nothing")
	}
	auditor := testdb.Conn(t, b.dsn, "outbox_auditor")
	var problems int
	if err := auditor.QueryRow(ctx, `SELECT count(*) FROM outbox.verify_event_digests(100000)`).Scan(&problems); err != nil {
		t.Fatal(err)
	}
	if problems != 0 {
		t.Fatalf("%d stored digests do not re-verify", problems)
	}
	t.Logf("special characters: %d accepted verbatim, %d refused with OB105/OB201", accepted, refused)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// R-DS-1..4, R-SEC-1: the registry entrances refuse malformed documents and hostile literals.
func TestBadInputRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	ref, err := os.ReadFile("../../reference/releases/oceanway-first-release.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	register := func(doc string, source string) error {
		_, err := pgcall.RegisterDeliverySet(ctx, reg, json.RawMessage(doc), source)
		return err
	}
	t.Run("definition not json", func(t *testing.T) {
		for _, doc := range []string{string(ref[:len(ref)/2]), "{'a':1}", "", string(ref) + "]"} {
			biUnchanged(t, admin, func() { biWantState(t, register(doc, "r1"), "22P02") })
		}
	})
	t.Run("definition duplicate key", func(t *testing.T) {
		doc := strings.Replace(string(ref), "{", `{"deliverySetVersion":1,`, 1)
		// OB101 with DETAIL "not canonicalizable: duplicate member name" (see below).
		biUnchanged(t, admin, func() { biWantState(t, register(doc, "r1"), "OB101") })
	})
	t.Run("definition non-integer number", func(t *testing.T) {
		doc := strings.Replace(string(ref), `"applicableEventCount": 13`, `"applicableEventCount": 13.5`, 1)
		if doc == string(ref) {
			t.Fatal("fixture lacks applicableEventCount")
		}
		// register_delivery_set reports every definition defect as OB101 (its DETAIL says "not
		// canonicalizable"), where append_event and ack_delivery use OB201.
		biUnchanged(t, admin, func() { biWantState(t, register(doc, "r1"), "OB101") })
	})
	t.Run("source release special characters", func(t *testing.T) {
		for name, v := range biNasty {
			t.Run(name, func(t *testing.T) {
				biUnchanged(t, admin, func() {
					err := register(string(ref), v)
					biWantState(t, err, "OB101", "22023")
				})
			})
		}
	})
	t.Run("register_destination special characters", func(t *testing.T) {
		call := func(args ...any) error {
			_, err := reg.Exec(ctx, `SELECT outbox.register_destination($1, $2, $3, $4, $5, $6, $7)`, args...)
			return err
		}
		for name, v := range biNasty {
			for i, field := range []string{"destination", "consumer_name", "receipt_kind", "receipt_type", "ordering"} {
				t.Run(field+"/"+name, func(t *testing.T) {
					args := []any{"special.dest", "special_consumer", "metering_input_processor", "MeteringInputProcessorConsumerReceipt", 1, false, "none"}
					args[map[int]int{0: 0, 1: 1, 2: 2, 3: 3, 4: 6}[i]] = v
					biUnchanged(t, admin, func() { biWantState(t, call(args...), "OB101", "22023") })
				})
			}
		}
	})
}

// R-AK-1, R-AK-2, R-CL-3: ack_delivery refuses documents that are not JSON, replays and other
// deliveries' fences, and changes nothing.
func TestBadInputAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	dispatcherfix.FastRetry(t, b.Admin, kernelfix.DestMetering, 10)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-ack-1", 1)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-ack-2", 1)
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 2, time.Minute, kernelfix.DestMetering)
	if len(cs) != 2 {
		t.Fatalf("claimed %d", len(cs))
	}
	c, other := cs[0], cs[1]
	ack, rc := kernelfix.ValidAck(t, c)

	t.Run("not_json", func(t *testing.T) {
		for name, p := range map[string][2]string{
			"ack truncated":     {string(ack[:len(ack)/2]), string(rc)},
			"receipt truncated": {string(ack), string(rc[:len(rc)/2])},
			"ack single quotes": {`{'a':1}`, string(rc)},
		} {
			t.Run(name, func(t *testing.T) {
				biUnchanged(t, b.Admin, func() {
					_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), json.RawMessage(p[0]), json.RawMessage(p[1]))
					biWantState(t, err, "22P02")
				})
			})
		}
	})
	t.Run("other_delivery", func(t *testing.T) {
		// The other delivery's valid ack presented with this fence, and this ack with the other's.
		oack, orc := kernelfix.ValidAck(t, other)
		biUnchanged(t, b.Admin, func() {
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), oack, orc)
			biWantState(t, err, "OB002")
			_, err = pgcall.AckDelivery(ctx, b.Disp, pgcall.Fence{Destination: c.Destination, EventID: c.EventID,
				AttemptID: c.AttemptID, LeaseToken: other.LeaseToken}, ack, rc)
			biWantState(t, err, "OB001")
		})
	})
	t.Run("replayed", func(t *testing.T) {
		// Attempt 1 ends retryable; attempt 2 is claimed; the ack of attempt 1 is replayed.
		ref := "consumer said later"
		if st, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", &ref); err != nil || st != "pending" {
			t.Fatalf("retry: %s %v", st, err)
		}
		var c2 pgcall.ClaimedDelivery
		dispatcherfix.Eventually(t, "re-claim", func() bool {
			for _, x := range kernelfix.Claim(t, b.Disp, kernelfix.WorkerB, 1, time.Minute, kernelfix.DestMetering) {
				c2 = x
				return true
			}
			return false
		})
		if c2.EventID != c.EventID || c2.AttemptNumber != 2 {
			t.Fatalf("re-claim %+v", c2)
		}
		biUnchanged(t, b.Admin, func() {
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
			biWantState(t, err, "OB001")
			_, err = pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", &ref)
			biWantState(t, err, "OB001")
		})
		// The current attempt acks (the receipt is the same document: idempotent by content).
		if res, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c2), ack, rc); err != nil || res != "complete" {
			t.Fatalf("ack of attempt 2: %s %v", res, err)
		}
		// Replayed after success, with either fence: OB001, nothing changes.
		biUnchanged(t, b.Admin, func() {
			_, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c2), ack, rc)
			biWantState(t, err, "OB001")
			_, err = pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), ack, rc)
			biWantState(t, err, "OB001")
		})
	})
}

// R-CL-1, R-AK-5, R-AK-6, R-AK-7: the text fields of the dispatch calls — claim worker name,
// retry error code and error ref, quarantine reason and error code.
func TestBadInputDispatchTextFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	dispatcherfix.FastRetry(t, b.Admin, kernelfix.DestMetering, 1000)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "agg-text", 1)

	t.Run("claim worker", func(t *testing.T) {
		for name, v := range biNasty {
			t.Run(name, func(t *testing.T) {
				biUnchanged(t, b.Admin, func() {
					_, err := pgcall.ClaimDeliveries(ctx, b.Disp, pgcall.ClaimParams{Worker: v, Destinations: []string{kernelfix.DestMetering}, BatchSize: 1, Lease: time.Minute})
					biWantState(t, err, "22023")
				})
			})
		}
		biUnchanged(t, b.Admin, func() {
			_, err := pgcall.ClaimDeliveries(ctx, b.Disp, pgcall.ClaimParams{Worker: "w", Destinations: []string{`x'); DROP TABLE outbox.outbox_events; --`}, BatchSize: 1, Lease: time.Minute})
			biWantState(t, err, "22023")
		})
	})
	claim := func(t *testing.T) pgcall.ClaimedDelivery {
		var c pgcall.ClaimedDelivery
		dispatcherfix.Eventually(t, "claim", func() bool {
			for _, x := range kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 1, time.Minute, kernelfix.DestMetering) {
				c = x
				return true
			}
			return false
		})
		return c
	}
	t.Run("retry error_ref", func(t *testing.T) {
		for name, v := range biNasty {
			t.Run(name, func(t *testing.T) {
				c := claim(t)
				ref := v
				if st, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_unavailable", &ref); err != nil || st != "pending" {
					t.Fatalf("retry: %s %v", st, err)
				}
				var fin, last *string
				if err := b.Admin.QueryRow(ctx, `SELECT f.sanitized_error_ref, d.last_error_ref
					FROM outbox.outbox_delivery_attempt_finishes f JOIN outbox.outbox_deliveries d ON d.destination = $2 AND d.event_id = $3::uuid
					WHERE f.attempt_id = $1::uuid`, c.AttemptID, c.Destination, c.EventID).Scan(&fin, &last); err != nil {
					t.Fatal(err)
				}
				want := biSanitize(v)
				if fin == nil || last == nil || *fin != want || *last != want {
					t.Fatalf("stored ref %q / %q, want %q", deref(fin), deref(last), trunc(want))
				}
			})
		}
	})
	t.Run("retry error_code", func(t *testing.T) {
		c := claim(t)
		for name, v := range biNasty {
			t.Run(name, func(t *testing.T) {
				ref := "r"
				biUnchanged(t, b.Admin, func() {
					_, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(c), v, &ref)
					biWantState(t, err, "22023")
				})
			})
		}
		t.Run("quarantine reason and code", func(t *testing.T) {
			for name, v := range biNasty {
				t.Run(name, func(t *testing.T) {
					biUnchanged(t, b.Admin, func() {
						biWantState(t, pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), v, "consumer_rejected", nil), "22023")
						biWantState(t, pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(c), "consumer_rejected", v, nil), "22023")
					})
				})
			}
		})
	})
}

// biSanitize is what outbox._dispatch_sanitize_ref is documented to store: control characters
// become spaces, whitespace runs collapse, trimmed, at most 200 characters.
func biSanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		// [[:cntrl:]] of the database's UTF-8 locale: C0, DEL, C1 and the line/paragraph separators.
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			r = ' '
		}
		b.WriteRune(r)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	if rs := []rune(out); len(rs) > 200 {
		out = string(rs[:200])
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return trunc(*p)
}

// R-CO-1: inbox.record_receipt refuses hostile consumer and projection names (22023), as the
// consumer role, and writes nothing.
func TestBadInputRecordReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := consumerfix.Setup(t)
	admin := testdb.Conn(t, b.Dsn, "")
	cons := testdb.Conn(t, b.Dsn, "outbox_consumer")
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.ExecutionAttemptEligibility, "agg-rr", 1))
	_, rc, err := dispatcherfix.Answer(d)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range biNasty {
		for _, field := range []string{"consumer", "projection"} {
			t.Run(field+"/"+name, func(t *testing.T) {
				p := pgcall.RecordReceiptParams{ConsumerName: spec.ConsumerName, EventEnvelope: d.Envelope, Receipt: rc}
				if field == "consumer" {
					p.ConsumerName = v
				} else {
					p.ProjectionName, p.ProjectionVersion = v, 1
				}
				biUnchanged(t, admin, func() {
					_, err := pgcall.RecordReceipt(ctx, cons, p)
					biWantState(t, err, "22023")
				})
			})
		}
	}
	// The untouched call is accepted (the cases above fail for their own reason only).
	if r, err := pgcall.RecordReceipt(ctx, cons, pgcall.RecordReceiptParams{ConsumerName: spec.ConsumerName, EventEnvelope: d.Envelope, Receipt: rc}); err != nil || r.Outcome != pgcall.ReceiptNew {
		t.Fatalf("valid receipt: %+v %v", r, err)
	}
}

// R-CO-4, R-CO-5, docs/transport-http.md: the consumer kit's HTTP handler answers malformed,
// duplicate-key, non-integer and oversized bodies and hostile headers with a stable status and
// code — never 500 — and applies nothing.
func TestBadInputConsumerHTTP(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	admin := testdb.Conn(t, b.Dsn, "")
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	srv := httptest.NewServer(b.Kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret = consumerfix.Secret; c.MaxBodyBytes = 64 << 10 }))
	t.Cleanup(srv.Close)
	env := consumerfix.Env(reference.ExecutionAttemptEligibility, "agg-http", 1)
	good := consumerfix.Delivery(t, spec, env)
	effects := func() string {
		var s string
		if err := admin.QueryRow(context.Background(), `SELECT count(*)::text || ':' || COALESCE(sum(applied_count), 0)::text FROM `+
			pgx.Identifier{spec.Schema}.Sanitize()+`.effects`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(t *testing.T, d wire.Delivery, extra map[string]string) (int, string) {
		t.Helper()
		before, fx := biSnapshot(t, admin), effects()
		status, body := consumerfix.Post(t, srv.URL, d, consumerfix.Secret, extra)
		if biSnapshot(t, admin) != before || effects() != fx {
			t.Fatalf("status %d changed state", status)
		}
		// Never a server error; 503 is the contract's retryable answer (with a retryable code).
		if status >= 500 && !(status == http.StatusServiceUnavailable && consumerfix.ErrorCode(t, body) == "consumer_unavailable") {
			t.Fatalf("status %d (%s): a bad input is never a server error", status, body)
		}
		return status, consumerfix.ErrorCode(t, body)
	}
	withBody := func(body string) wire.Delivery {
		d := good
		d.Envelope = []byte(body)
		d.EnvelopeSHA256 = biRawSHA(body) // the header matches the bytes: only the body is bad
		return d
	}
	raw, _ := json.Marshal(env)
	for name, body := range map[string]string{
		"not json":      "hello",
		"truncated":     string(raw[:len(raw)/2]),
		"empty":         "",
		"duplicate key": `{"eventType":"x",` + string(raw[1:]),
		"non-integer":   strings.Replace(string(raw), `"aggregateRevision":1`, `"aggregateRevision":1.5`, 1),
		"float payload": strings.Replace(string(raw), `"payload":{`, `"payload":{"f":0.5,`, 1),
		"array":         "[" + string(raw) + "]",
		"invalid utf-8": "{\"a\":\"\xff\"}",
		"nul escape":    strings.Replace(string(raw), `"agg-http"`, `"agg-\u0000"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			status, code := post(t, withBody(body), nil)
			if status != http.StatusUnprocessableEntity || code != "envelope_invalid" {
				t.Fatalf("status %d code %q, want 422 envelope_invalid", status, code)
			}
		})
	}
	t.Run("oversized", func(t *testing.T) {
		status, code := post(t, withBody(`{"pad":"`+strings.Repeat("x", 65<<10)+`"}`), nil)
		if status != http.StatusRequestEntityTooLarge || code != "body_too_large" {
			t.Fatalf("status %d code %q, want 413 body_too_large", status, code)
		}
	})
	t.Run("special characters in headers", func(t *testing.T) {
		for name, v := range biNasty {
			if strings.ContainsAny(v, "\r\n\x00\x01\x1f\x7f") {
				continue // not representable in an HTTP header: refused by the client library itself
			}
			// (Pgoutbox-Attempt-Id is informational: the kit keys on the event, not the attempt.)
			for _, h := range []string{wire.HeaderDestination, wire.HeaderConsumer, wire.HeaderEventID,
				wire.HeaderReceiptType, wire.HeaderProjection, wire.HeaderEnvelopeSHA256, wire.HeaderAttemptNumber, wire.HeaderReceiptSchema} {
				t.Run(h+"/"+name, func(t *testing.T) {
					status, code := post(t, good, map[string]string{h: v})
					// A refusal: 4xx, or 503 with a retryable code for a delivery addressed to another
					// destination/consumer (misrouting is a configuration error, never quarantined).
					if (status < 400 || status >= 500) && !(status == http.StatusServiceUnavailable && code == "consumer_unavailable") {
						t.Fatalf("status %d code %q, want a refusal", status, code)
					}
				})
			}
		}
	})
	// The untouched delivery is applied (the cases above fail for their own reason only).
	if status, body := consumerfix.Post(t, srv.URL, good, consumerfix.Secret, nil); status != http.StatusOK {
		t.Fatalf("valid delivery: %d %s", status, body)
	}
}

// biRawSHA is the hex SHA-256 of the raw bytes (not canonicalized).
func biRawSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// R-AK-1a, R-AK-2, R-DP-1: forged acks that reach the dispatcher (another receipt kind, another
// projection) are refused by ack_delivery and retried as invalid_ack — never acknowledged, never
// published — until the policy quarantines them as retry_exhausted.
func TestBadInputDispatcherForgedAcks(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	dispatcherfix.FastRetry(t, db.Admin, "core_operations", 3)
	forge := func(d wire.Delivery, edit func(ack, rc map[string]any)) dispatcherfix.Reply {
		ack, rc, err := dispatcherfix.Answer(d)
		if err != nil {
			return dispatcherfix.Reply{Kind: "status", Code: 500}
		}
		var am, rm map[string]any
		_ = json.Unmarshal(ack, &am)
		_ = json.Unmarshal(rc, &rm)
		edit(am, rm)
		a, _ := json.Marshal(am)
		r, _ := json.Marshal(rm)
		body, _ := json.Marshal(wire.HTTPSuccessBody{Ack: a, Receipt: r})
		return dispatcherfix.Reply{Kind: "status", Code: 200, Body: string(body)}
	}
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		switch call {
		case 1: // another receipt kind in the ack quartet
			return forge(d, func(ack, _ map[string]any) {
				ack["appliedReceipt"].(map[string]any)["kind"] = "metering_input_processor"
			})
		case 2: // another projection, digest recomputed so the receipt is self-consistent
			return forge(d, func(_, rc map[string]any) { rc["projectionName"] = "operations_timeline_shadow" })
		}
		// a wrong receipt digest
		return forge(d, func(ack, rc map[string]any) {
			ack["appliedReceipt"].(map[string]any)["operationsProjectionAppliedReceiptDigest"] = strings.Repeat("a", 64)
			rc["operationsProjectionAppliedReceiptDigest"] = strings.Repeat("a", 64)
		})
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-forged", map[string]config.Destination{"core_operations": dispatcherfix.HTTPDest(srv.URL)})
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{"core_operations": h})
	ev := testfix.Append(t, db.Admin, testfix.Envelope("run.created@2.0", "2.0", "run-forged", 1))
	dispatcherfix.Eventually(t, "terminal", func() bool { return db.Status(t, "core_operations", ev) == "quarantined" })
	got := db.Attempts(t, "core_operations", ev)
	if len(got) != 3 {
		t.Fatalf("attempts %+v", got)
	}
	for _, a := range got {
		if a.Outcome != "retryable" || a.Code != "invalid_ack" {
			t.Fatalf("attempt %+v: want retryable invalid_ack", a)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE event_id = $1::uuid
		AND (delivered_at IS NOT NULL OR ack_receipt_digest IS NOT NULL)`, ev); n != 0 {
		t.Fatal("a forged ack left acknowledgement fields")
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_events e WHERE e.event_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`, ev); n != 1 {
		t.Fatal("event published on a forged ack")
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'retry_exhausted'`, ev); n != 1 {
		t.Fatal("no retry_exhausted quarantine")
	}
}
