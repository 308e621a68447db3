package tests

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/testdb"
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
}

// D-2, T-6: the Go and the PL/pgSQL canonicalizers agree on every input: both accept with
// byte-identical output (and equal digests), or both reject — SQL with OB201 or a class 22 input
// error of the json/text cast (22P02 invalid JSON, 22021 invalid UTF-8), Go with
// ErrNotCanonicalizable. The seed corpus runs under plain `go test`; fuzz with
// `go test ./tests -run '^$' -fuzz FuzzCanonicalAgreement -fuzztime 30s`.
func FuzzCanonicalAgreement(f *testing.F) {
	for _, vec := range jcsVectors(f) {
		f.Add(vec.in)
	}
	for _, s := range jcsFuzzSeeds {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	conn := testdb.Conn(f, testdb.URL(f), "outbox_producer")
	if _, err := conn.Exec(ctx, `SET statement_timeout = '20s'`); err != nil {
		f.Fatal(err)
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
	})
}
