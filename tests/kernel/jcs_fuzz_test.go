package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// jcsFuzzSeeds are tricky documents added to the golden vectors in the seed corpus.
var jcsFuzzSeeds = []string{
	`56.0`, `1E2`, `-0`, `-0.0`, `0.5e1`, `1e15`, `1e16`, `9007199254740991`, `9007199254740992`,
	`-9007199254740991`, `-9007199254740992`, `1.5`, `4.50`, `1e-7`, `0e99999999999`, `1E+2`, `10e-1`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":1}`, `{"a":{"b":1,"b":2}}`,
	`{"\ud83d\ude02":1,"\ufb33":2}`, `{"\ue000":1,"\ud800\udc00":2,"\uffff":3,"\ud7ff":4}`,
	`"\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\uD83D\uDE02"`, `"\u00e9e\u0301"`,
	`"\b\f\n\r\t\"\\\/\u0001\u001f\u007f\u2028"`, "\"\x7f\xc3\xa9\"", "\"\xff\"", "\"\xed\xa0\x80\"",
	` {"z":[],"y":{},"x":[null,true,false]} `, "\t\r\n[1]\n", `[]`, `{}`, `""`, `null`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"a":1,}`, `[1,]`, `01`, `+1`, `.5`, `1.`, `1e`, `-`, `NaN`, `tru`, `{"a"}`, `{1:2}`, `"abc`, ``,
	`{"a":1} {}`, "\xef\xbb\xbf{}", "[1,\x00]", `"\x"`, "\"a\tb\"", `[1e999]`, `[-1E-999]`,
	// canonical texts and near misses for the hot path's check (outbox._jcs_text_problem)
	`{"a":1,"b":[{"d":2,"c":1}]}`, `{"b":[{"c":1,"d":2}],"a":1}`, `{"a{":1,"a}":2}`, `{"a}":1,"a{":2}`,
	`{"":1,"a":2}`, `{"a":2,"":1}`, `{"\"":1,"\\":2}`, `{"\\":1,"\"":2}`, `{"a":"\"}{:","b":"\\\""}`,
	`{"\u001f":1,"a":2}`, `{"\u001F":1}`, `{"\n":1,"\u000b":2}`, "{\"\ue000\":1,\"\U0001F600\":2}",
	"{\"\U0001F600\":2,\"\ue000\":1}", "{\"\U0001F600\":1,\"\u00e9\":2}", "{\"\u00e9\":2,\"\U0001F600\":1}",
	`{"a":1,"a":1}`, `{"a":{"b":1},"a":{"b":1}}`, `[{"a":1},{"a":1}]`, `{"a":[],"b":{},"c":[{}]}`,
	`9007199254740991`, `-9007199254740991`, `[9007199254740992]`, `{"n":1000000000000000}`, `{"n":1.0}`,
	`{"a": 1}`, `{"a":1}` + "\n", `["\/"]`, `["\u0041"]`, `{"a":"x","b":1,"c":true,"d":null,"e":false}`,
	strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64), strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
	jcsManyMembers(64, false), jcsManyMembers(65, false), jcsManyMembers(70, true),
	// R-SEC-5: member names of 1024 characters pass, of 1025 are refused, on both sides
	`{"` + strings.Repeat("a", 1024) + `":1}`, `{"` + strings.Repeat("a", 1025) + `":1}`,
	`{"` + strings.Repeat(`\u00e9`, 1024) + `":1}`, `{"` + strings.Repeat(`\u00e9`, 1025) + `":1}`,
	`{"` + strings.Repeat("!", 3000) + `a":1,"a":1}`,
}

// jcsManyMembers is a canonical object with n members, or with its last two members swapped.
func jcsManyMembers(n int, swapLast bool) string {
	var keys []string
	for i := 0; i < n; i++ {
		keys = append(keys, fmt.Sprintf(`"k%03d":%d`, i, i))
	}
	if swapLast {
		keys[n-1], keys[n-2] = keys[n-2], keys[n-1]
	}
	return "{" + strings.Join(keys, ",") + "}"
}

// D-2, T-6: the Go and the PL/pgSQL canonicalizers agree on every input: both accept with
// byte-identical output (and equal digests), or both reject — SQL with OB201 or a class 22 input
// error of the json/text cast (22P02 invalid JSON, 22021 invalid UTF-8), Go with
// ErrNotCanonicalizable. And the hot path's check (outbox._jcs_text_problem, D-2 "the hot path
// accepts exactly what the slow path accepts") reaches the same decision: it accepts the
// canonical text of every accepted document, and accepts the input text itself exactly when the
// slow path accepts the input and the input is already its own canonical form. The seed corpus
// runs under plain `go test`; fuzz with
// `go test ./tests/kernel -run '^$' -fuzz FuzzCanonicalAgreement -fuzztime 30s`.
func FuzzCanonicalAgreement(f *testing.F) {
	for _, vec := range jcsVectors(f) {
		f.Add(vec.in)
		if vec.out != nil {
			f.Add(vec.out) // canonical texts: the hot path's check must accept them
		}
	}
	for _, s := range jcsFuzzSeeds {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	url := testdb.URL(f)
	conn := testdb.Conn(f, url, "outbox_producer")
	owner := testdb.Conn(f, url, "outbox_owner") // the private hot-path check
	for _, c := range []*pgx.Conn{conn, owner} {
		if _, err := c.Exec(ctx, `SET statement_timeout = '20s'`); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		goOut, goErr := canon.Canonicalize(doc)
		if goErr != nil && !errors.Is(goErr, canon.ErrNotCanonicalizable) {
			t.Fatalf("Go rejection does not wrap ErrNotCanonicalizable: %v", goErr)
		}
		sqlOut, sqlDigest, sqlErr := jcsSQL(ctx, conn, doc)
		state := jcsSQLState(sqlErr)
		if sqlErr != nil && state == "" {
			t.Fatalf("SQL call failed outside PostgreSQL: %v", sqlErr)
		}
		sqlRejects := state == "OB201" || strings.HasPrefix(state, "22") || state == "54001"
		if sqlErr != nil && !sqlRejects {
			t.Fatalf("SQL raised unexpected SQLSTATE %s for %q: %v", state, doc, sqlErr)
		}
		switch {
		case goErr == nil && sqlErr == nil:
			if !bytes.Equal(goOut, []byte(sqlOut)) {
				t.Fatalf("outputs differ for %q:\n Go  %q\n SQL %q", doc, goOut, sqlOut)
			}
			if d, err := canon.SHA256Hex(doc); err != nil || d != sqlDigest || d != jcsSHA(goOut) {
				t.Fatalf("digests differ for %q: Go %s (%v), SQL %s", doc, d, err, sqlDigest)
			}
		case goErr != nil && sqlErr != nil:
			// both reject
		case goErr != nil:
			t.Fatalf("Go rejects, SQL accepts %q:\n Go  %v\n SQL %q", doc, goErr, sqlOut)
		default:
			t.Fatalf("Go accepts, SQL rejects %q:\n Go  %q\n SQL %v", doc, goOut, sqlErr)
		}
		// The hot path's check on the Go canonical text: accepted whenever the document is.
		if goErr == nil {
			problem, err := jcsTextProblem(ctx, owner, goOut)
			if err != nil {
				t.Fatalf("_jcs_text_problem raised for %q: %v", goOut, err)
			}
			if problem != nil {
				t.Fatalf("hot path refuses the canonical text %q of an accepted document: %s", goOut, *problem)
			}
		}
		// ... and on the input text itself: accepted exactly when the slow path accepts the
		// input and returns it unchanged. (Text PostgreSQL cannot hold is refused before.)
		problem, err := jcsTextProblem(ctx, owner, doc)
		if err != nil {
			if s := jcsSQLState(err); strings.HasPrefix(s, "22") && sqlErr != nil {
				return
			}
			t.Fatalf("_jcs_text_problem raised for %q: %v", doc, err)
		}
		slowCanonical := sqlErr == nil && sqlOut == string(doc)
		if (problem == nil) != slowCanonical {
			t.Fatalf("hot path and slow path disagree on %q: hot problem %v, slow accepts and keeps it: %v (slow %q, %v)",
				doc, deref(problem), slowCanonical, sqlOut, sqlErr)
		}
	})
}

// jcsTextProblem calls outbox._jcs_text_problem (the D-2 hot path's check; NULL = acceptable
// canonical text) with the text as a query parameter, so the IMMUTABLE function is never folded.
func jcsTextProblem(ctx context.Context, q jcsQuerier, text []byte) (*string, error) {
	var p *string
	err := q.QueryRow(ctx, `SELECT outbox._jcs_text_problem(s.t) FROM (SELECT $1::text AS t) AS s`, string(text)).Scan(&p)
	return p, err
}
