package kernel

import (
	"context"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// jcsKeyParts are the characters member names are built from: ASCII, escapes the canonical form
// keeps (quote, backslash, control characters), the structural characters the hot path's check
// rewrites, and characters on both sides of RFC 8785's UTF-16 order exceptions.
var jcsKeyParts = []string{"a", "b", "A", "Z", "0", "_", " ", "{", "}", "[", ":", ",", `"`, `\`, "\n", "\u001f",
	"\u007f", "é", "Ω", "\u2028", "\ue000", "\ufb33", "\uffff", "😀", "😂", ""}

func jcsRandomKey(r *rand.Rand) string {
	var b strings.Builder
	for n := r.Intn(4); n >= 0; n-- {
		b.WriteString(jcsKeyParts[r.Intn(len(jcsKeyParts))])
	}
	return b.String()
}

func jcsRandomValue(r *rand.Rand, depth int) any {
	switch k := r.Intn(10); {
	case depth > 3 || k < 3:
		switch r.Intn(6) {
		case 0:
			return r.Int63n(1<<53) - 1<<52
		case 1:
			return jcsRandomKey(r)
		case 2:
			return r.Intn(2) == 0
		case 3:
			return nil
		case 4:
			return 9007199254740991
		default:
			return "x"
		}
	case k < 6:
		a := make([]any, r.Intn(4))
		for i := range a {
			a[i] = jcsRandomValue(r, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for n := r.Intn(7); n > 0; n-- {
			m[jcsRandomKey(r)] = jcsRandomValue(r, depth+1)
		}
		return m
	}
}

// jcsMutations are texts near a canonical text c: some still canonical, most not.
func jcsMutations(r *rand.Rand, c string) []string {
	out := []string{c}
	if rs := []rune(c); len(rs) > 1 {
		out = append(out, string(rs[:1+r.Intn(len(rs)-1)])) // a truncation (mostly not JSON)
	}
	for _, pair := range [][2]string{{`":`, `": `}, {`,`, `, `}, {`{`, `{ `}, {`1`, `1.0`}, {`1`, `1e0`},
		{`"a"`, `"\u0061"`}, {`\n`, `\u000a`}, {`\u001f`, `\u001F`}, {`/`, `\/`}, {`-`, `-0`}} {
		if strings.Contains(c, pair[0]) {
			out = append(out, strings.Replace(c, pair[0], pair[1], 1))
		}
	}
	// Reverse the member order of the outermost object (a canonical permutation only when it
	// has at most one member).
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(c), &m) == nil && len(m) > 1 {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		var parts []string
		for i := len(keys) - 1; i >= 0; i-- {
			kb, _ := json.Marshal(keys[i])
			parts = append(parts, string(kb)+":"+string(m[keys[i]]))
		}
		out = append(out, "{"+strings.Join(parts, ",")+"}")
		// duplicate the first member
		if i := strings.Index(c, ","); i > 0 && c[0] == '{' {
			out = append(out, c[:i]+","+c[1:])
		}
	}
	return out
}

// D-2 "the hot path accepts exactly what the slow path accepts": for random documents (names
// with escapes, structural characters, and characters on both sides of the UTF-16 order
// exceptions) and texts near their canonical form, outbox._jcs_text_problem accepts a text
// exactly when the slow path accepts its document and returns the very same text.
func TestJCSTextProblemAgreesWithSlowPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Conn(t, testdb.URL(t), "")
	if _, err := admin.Exec(ctx, `CREATE FUNCTION pg_temp.slow_keeps(p text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN RETURN outbox.jcs_canonicalize(p::json) = p; EXCEPTION WHEN OTHERS THEN RETURN false; END $$`); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(20260101))
	var texts []string
	for len(texts) < 3000 {
		doc, err := json.Marshal(jcsRandomValue(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		c, err := canon.Canonicalize(doc)
		if err != nil {
			t.Fatalf("Go refuses its own document %s: %v", doc, err)
		}
		texts = append(texts, jcsMutations(r, string(c))...)
	}
	rows, err := admin.Query(ctx, `SELECT t, outbox._jcs_text_problem(t), pg_temp.slow_keeps(t) FROM unnest($1::text[]) AS t`, texts)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	accepted, refused := 0, 0
	for rows.Next() {
		var text string
		var problem *string
		var slow bool
		if err := rows.Scan(&text, &problem, &slow); err != nil {
			t.Fatal(err)
		}
		if (problem == nil) != slow {
			t.Errorf("hot path %v, slow path keeps it: %v, for %q", deref(problem), slow, text)
		}
		if gc, err := canon.Canonicalize([]byte(text)); (err == nil && string(gc) == text) != slow {
			t.Errorf("Go and the slow path disagree on %q", text)
		}
		if problem == nil {
			accepted++
		} else {
			refused++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if accepted < 500 || refused < 500 {
		t.Fatalf("weak sample: %d accepted, %d refused", accepted, refused)
	}
	t.Logf("%d texts accepted, %d refused, all as the slow path decides", accepted, refused)
}
