package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/vectors"
)

// jcsKernelRoles may all execute outbox.jcs_canonicalize and outbox.jcs_sha256 (D-2).
var jcsKernelRoles = []string{"outbox_owner", "outbox_registrar", "outbox_producer",
	"outbox_dispatcher", "outbox_consumer", "outbox_auditor"}

// jcsQuerier is what both *pgx.Conn and *pgxpool.Pool offer.
type jcsQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// jcsSQL canonicalizes doc in the database. The document is a query parameter ($1::text::json)
// so the IMMUTABLE function is never folded over a constant; returns canonical text and digest.
func jcsSQL(ctx context.Context, q jcsQuerier, doc []byte) (string, string, error) {
	var c, d string
	err := q.QueryRow(ctx,
		`SELECT outbox.jcs_canonicalize(s.d), outbox.jcs_sha256(s.d) FROM (SELECT $1::text::json AS d) AS s`,
		string(doc)).Scan(&c, &d)
	return c, d, err
}

func jcsSQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func jcsSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type jcsVector struct {
	name    string
	in, out []byte // out is nil for vectors outside the subset (values.json)
}

// jcsVectors loads every golden vector: rfc8785/* and gowebpki-extra/*.
func jcsVectors(t testing.TB) []jcsVector {
	t.Helper()
	v := vectors.Dir(t)
	var vs []jcsVector
	for _, sub := range []string{"rfc8785", "gowebpki-extra"} {
		files, err := filepath.Glob(filepath.Join(v, sub, "input", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range files {
			in, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			vec := jcsVector{name: sub + "/" + filepath.Base(p), in: in}
			if filepath.Base(p) != "values.json" {
				out, err := os.ReadFile(filepath.Join(v, sub, "output", filepath.Base(p)))
				if err != nil {
					t.Fatal(err)
				}
				vec.out = out
			}
			vs = append(vs, vec)
		}
	}
	if len(vs) != 10 {
		t.Fatalf("want 10 golden vectors (6 rfc8785 + 4 gowebpki-extra), found %d", len(vs))
	}
	return vs
}

// D-2, T-6: every golden vector gives the expected bytes in SQL (called as outbox_producer) and
// in Go, and jcs_sha256 / canon.SHA256Hex are the SHA-256 of those bytes.
func TestJCSGoldenVectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "outbox_producer")
	for _, vec := range jcsVectors(t) {
		if vec.out == nil {
			continue // values.json: TestJCSValuesVector
		}
		gotSQL, digSQL, err := jcsSQL(ctx, conn, vec.in)
		if err != nil {
			t.Errorf("%s: SQL: %v", vec.name, err)
			continue
		}
		if gotSQL != string(vec.out) {
			t.Errorf("%s: SQL\n got %s\nwant %s", vec.name, gotSQL, vec.out)
		}
		if digSQL != jcsSHA(vec.out) {
			t.Errorf("%s: jcs_sha256 = %s, want %s", vec.name, digSQL, jcsSHA(vec.out))
		}
		gotGo, err := canon.Canonicalize(vec.in)
		if err != nil {
			t.Errorf("%s: Go: %v", vec.name, err)
			continue
		}
		if string(gotGo) != string(vec.out) {
			t.Errorf("%s: Go\n got %s\nwant %s", vec.name, gotGo, vec.out)
		}
		if d, err := canon.SHA256Hex(vec.in); err != nil || d != digSQL {
			t.Errorf("%s: canon.SHA256Hex = %s, %v; want %s", vec.name, d, err, digSQL)
		}
	}
}

// jcsValuesWithoutNumbers is rfc8785/output/values.json without its "numbers" member, written
// by hand once and checked against the vector file below.
const jcsValuesWithoutNumbers = `{"literals":[null,true,false],"string":"€$\u000f\nA'B\"\\\\\"/"}`

// D-2, T-6: values.json (non-integer numbers) is rejected as a whole by both (OB201 /
// ErrNotCanonicalizable); without "numbers" it matches the expected output minus that member.
func TestJCSValuesVector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := filepath.Join(vectors.Dir(t), "rfc8785")
	in, err := os.ReadFile(filepath.Join(v, "input", "values.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(v, "output", "values.json"))
	if err != nil {
		t.Fatal(err)
	}
	const numbers = `"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],`
	if spliced := strings.Replace(string(out), numbers, "", 1); spliced != jcsValuesWithoutNumbers {
		t.Fatalf("output/values.json minus numbers = %s, literal = %s", spliced, jcsValuesWithoutNumbers)
	}
	var kept []string
	lines := strings.Split(string(in), "\n")
	for _, l := range lines {
		if !strings.Contains(l, `"numbers"`) {
			kept = append(kept, l)
		}
	}
	if len(kept) != len(lines)-1 {
		t.Fatal("expected exactly one numbers line in input/values.json")
	}
	noNumbers := []byte(strings.Join(kept, "\n"))

	conn := testdb.Conn(t, testdb.URL(t), "outbox_registrar")
	if _, _, err := jcsSQL(ctx, conn, in); jcsSQLState(err) != "OB201" {
		t.Errorf("SQL values.json: err = %v, want OB201", err)
	}
	if _, err := canon.Canonicalize(in); !errors.Is(err, canon.ErrNotCanonicalizable) {
		t.Errorf("Go values.json: err = %v, want ErrNotCanonicalizable", err)
	}
	got, dig, err := jcsSQL(ctx, conn, noNumbers)
	if err != nil || got != jcsValuesWithoutNumbers || dig != jcsSHA([]byte(jcsValuesWithoutNumbers)) {
		t.Errorf("SQL values.json without numbers = %s (%s), %v; want %s", got, dig, err, jcsValuesWithoutNumbers)
	}
	gotGo, err := canon.Canonicalize(noNumbers)
	if err != nil || string(gotGo) != jcsValuesWithoutNumbers {
		t.Errorf("Go values.json without numbers = %s, %v; want %s", gotGo, err, jcsValuesWithoutNumbers)
	}
}

// D-2, T-6: the subset boundaries agree in SQL and Go: accepted documents give the same bytes,
// rejected ones raise OB201 in SQL and ErrNotCanonicalizable in Go.
func TestJCSSubsetAgreement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "outbox_dispatcher")
	accept := map[string]string{
		`9007199254740991`:        `9007199254740991`, // 2^53-1
		`-9007199254740991`:       `-9007199254740991`,
		`56.0`:                    `56`,
		`1E2`:                     `100`,
		`-0`:                      `0`,
		`-0.000e-5`:               `0`,
		`0.5e1`:                   `5`,
		`90071992547409910e-1`:    `9007199254740991`,
		`0e999999999999999999999`: `0`,
		`[1e15,-1E+3,10.00]`:      `[1000000000000000,-1000,10]`,
		// UTF-16 order: U+1F602 (D83D DE02) sorts before U+FB33, though code-point order differs.
		`{"\ufb33":2,"\ud83d\ude02":1,"\ue000":3,"\uffff":4,"\ud7ff":5}`: "{\"\uD7FF\":5,\"\U0001F602\":1,\"\uE000\":3,\"\uFB33\":2,\"\uFFFF\":4}",
		`{"b":"\u00e9","a":"e\u0301","c":"\u001f\u007f\/\"\\"}`:          "{\"a\":\"e\u0301\",\"b\":\"\u00e9\",\"c\":\"\\u001f\x7f/\\\"\\\\\"}",
		` { "z" : [ ] , "y" : { } , "x" : [ null , true , false ] } `:    `{"x":[null,true,false],"y":{},"z":[]}`,
		`" top-level string "`:                                       `" top-level string "`,
		strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64):      strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64),
		strings.Repeat(`{"a":`, 63) + "{}" + strings.Repeat("}", 63): strings.Repeat(`{"a":`, 63) + "{}" + strings.Repeat("}", 63),
	}
	for in, want := range accept {
		got, dig, err := jcsSQL(ctx, conn, []byte(in))
		if err != nil || got != want || dig != jcsSHA([]byte(want)) {
			t.Errorf("SQL %q = %q (%s), %v; want %q", in, got, dig, err, want)
		}
		gotGo, err := canon.Canonicalize([]byte(in))
		if err != nil || string(gotGo) != want {
			t.Errorf("Go %q = %q, %v; want %q", in, gotGo, err, want)
		}
	}
	reject := []string{
		`9007199254740992`, `-9007199254740992`, `1e16`, `12345678901234567890`, // beyond 2^53-1
		`1.5`, `0.1`, `-1e-1`, `4.50`, `9007199254740991.5`, `1.0000000000000000000001`, `1e-999999999999`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":1}`, `[{"x":{"k":[],"k":{}}}]`, // duplicate names
		`"\u0000"`, `{"\u0000":1}`, `["a\u0000b"]`, // U+0000
		`"\ud800"`, `"\udc00"`, `{"\ud800":1}`, `["\ud800\u0041"]`, // unpaired surrogates
		strings.Repeat("[", 65) + strings.Repeat("]", 65), // depth 65
		strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
		strings.Repeat("[", 64) + "{}" + strings.Repeat("]", 64),
	}
	for _, in := range reject {
		if got, _, err := jcsSQL(ctx, conn, []byte(in)); jcsSQLState(err) != "OB201" {
			t.Errorf("SQL %q = %q, err %v; want OB201", in, got, err)
		}
		if got, err := canon.Canonicalize([]byte(in)); !errors.Is(err, canon.ErrNotCanonicalizable) {
			t.Errorf("Go %q = %q, err %v; want ErrNotCanonicalizable", in, got, err)
		}
	}
	// Text that is not JSON at all fails in the json cast (22P02) before the function runs.
	for _, in := range []string{`{"a":1,}`, `01`, `{"a":1} x`, ``} {
		if _, _, err := jcsSQL(ctx, conn, []byte(in)); !strings.HasPrefix(jcsSQLState(err), "22") {
			t.Errorf("SQL %q: err %v; want a class 22 input error", in, err)
		}
		if _, err := canon.Canonicalize([]byte(in)); !errors.Is(err, canon.ErrNotCanonicalizable) {
			t.Errorf("Go %q: err %v; want ErrNotCanonicalizable", in, err)
		}
	}
	// NULL in, NULL out.
	var c, d *string
	if err := conn.QueryRow(ctx, `SELECT outbox.jcs_canonicalize($1::json), outbox.jcs_sha256($1::json)`, nil).Scan(&c, &d); err != nil || c != nil || d != nil {
		t.Errorf("NULL: %v, %v, %v; want NULL, NULL", c, d, err)
	}
}

// D-2: outbox._sha256_hex is sha256 of the UTF-8 bytes, owned by outbox_owner, granted to no one.
func TestJCSSHA256HexHelper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	in := "é😂\n{\"a\":1}"
	var got string
	if err := pool.QueryRow(ctx, `SELECT outbox._sha256_hex($1::text)`, in).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != jcsSHA([]byte(in)) {
		t.Fatalf("_sha256_hex = %s, want %s", got, jcsSHA([]byte(in)))
	}
}

// D-2, R-SEC-1/2: the public functions are SECURITY DEFINER owned by outbox_owner with a pinned
// search_path, IMMUTABLE and PARALLEL SAFE, take json (not jsonb), are executable by every kernel
// role and not by PUBLIC; the private helpers are executable by no kernel role but the owner.
func TestJCSGrantsAndAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	rows, err := pool.Query(ctx, `
		SELECT p.oid::regprocedure::text, p.proowner::regrole::text, p.prosecdef, p.provolatile, p.proparallel,
		       coalesce(array_to_string(p.proconfig, ';'), ''), has_function_privilege('public', p.oid, 'EXECUTE')
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'outbox' AND (p.proname LIKE 'jcs\_%' OR p.proname LIKE '\_jcs\_%' OR p.proname = '_sha256_hex')
		 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var sig, owner, config string
		var secdef, public bool
		var volatile, parallel string
		if err := rows.Scan(&sig, &owner, &secdef, &volatile, &parallel, &config, &public); err != nil {
			t.Fatal(err)
		}
		seen[sig] = true
		isPublicAPI := strings.HasPrefix(sig, "outbox.jcs_")
		// The public pair and _jcs_text_problem are PARALLEL UNSAFE (an exception block;
		// TestJCSInParallelQuery), the exception-free helpers PARALLEL SAFE.
		hasExceptionBlock := isPublicAPI || sig == "outbox._jcs_text_problem(text)"
		wantParallel := map[bool]string{true: "u", false: "s"}[hasExceptionBlock]
		// _sha256_hex and _jcs_sort_key are inlinable LANGUAGE sql helpers: no SET (it would
		// prevent inlining); they call only schema-qualified pg_catalog functions.
		wantConfig := "search_path=pg_catalog, pg_temp"
		if sig == "outbox._sha256_hex(text)" || sig == "outbox._jcs_sort_key(text)" {
			wantConfig = ""
		}
		if owner != "outbox_owner" || volatile != "i" || parallel != wantParallel || public ||
			config != wantConfig || secdef != isPublicAPI {
			t.Errorf("%s: owner=%s secdef=%v volatile=%s parallel=%s config=%q public=%v", sig, owner, secdef, volatile, parallel, config, public)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{"outbox.jcs_canonicalize(json)", "outbox.jcs_sha256(json)", "outbox._sha256_hex(text)",
		"outbox._jcs_value(json,integer)", "outbox._jcs_number(text)", "outbox._jcs_sort_key(text)",
		"outbox._jcs_text_problem(text)"} {
		if !seen[sig] {
			t.Errorf("function %s missing", sig)
		}
	}
	for _, role := range jcsKernelRoles {
		for sig := range seen {
			var can bool
			if err := pool.QueryRow(ctx, `SELECT has_function_privilege($1, $2::regprocedure, 'EXECUTE')`, role, sig).Scan(&can); err != nil {
				t.Fatal(err)
			}
			want := strings.HasPrefix(sig, "outbox.jcs_") || role == "outbox_owner"
			if can != want {
				t.Errorf("%s EXECUTE %s = %v, want %v", role, sig, can, want)
			}
		}
	}
	// Every kernel role really calls the public functions; a non-owner cannot call a helper.
	dsn := testdb.URL(t)
	for _, role := range jcsKernelRoles {
		conn := testdb.Conn(t, dsn, role)
		got, dig, err := jcsSQL(ctx, conn, []byte(`{"b":1,"a":2}`))
		if err != nil || got != `{"a":2,"b":1}` || dig != jcsSHA([]byte(`{"a":2,"b":1}`)) {
			t.Errorf("%s: %q %q %v", role, got, dig, err)
		}
		if role == "outbox_owner" {
			continue
		}
		var s string
		err = conn.QueryRow(ctx, `SELECT outbox._sha256_hex($1::text)`, "x").Scan(&s)
		if jcsSQLState(err) != "42501" {
			t.Errorf("%s: _sha256_hex err = %v, want 42501 permission denied", role, err)
		}
	}
}

// jcsBenchDoc is a ~2 KB event-like object with 165 JSON values (14 objects, 12 arrays).
func jcsBenchDoc() []byte {
	var b strings.Builder
	b.WriteString(`{"eventId":"0b7e2f3a-9c1d-4e5f-8a6b-7c8d9e0f1a2b","eventType":"flight.state_changed",` +
		`"eventSchemaVersion":"1","occurredAt":"2024-05-01T12:00:00Z","aggregate":{"type":"flight","id":"OW1234-20240501"},"payload":{`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"leg%02d":{"seq":%d,"from":"AMS-Schiphol","to":"LHR-Heathrow","status":"scheduled","gate":"D%02d","delayMinutes":%d,"crew":[%d,%d,%d],"ok":true,"note":null}`,
			i, i, i, i*5, i, i+1, i+2)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// D-2: cost of the PL/pgSQL canonicalizer on a ~2 KB document (documents read from a table
// column, so nothing folds). Logged, and bounded loosely so a pathological regression fails.
func TestJCSCanonicalizeCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	doc := jcsBenchDoc()
	want, err := canon.Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE jcs_bench AS SELECT g, $1::text::json AS doc FROM generate_series(1, $2::int) g`, string(doc), n); err != nil {
		t.Fatal(err)
	}
	var sample string
	if err := conn.QueryRow(ctx, `SELECT outbox.jcs_canonicalize(doc) FROM jcs_bench WHERE g = 1`).Scan(&sample); err != nil {
		t.Fatal(err)
	}
	if sample != string(want) {
		t.Fatalf("SQL %s != Go %s", sample, want)
	}
	start := time.Now()
	var count int
	if err := conn.QueryRow(ctx, `SELECT count(outbox.jcs_canonicalize(doc)) FROM jcs_bench`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	per := time.Since(start) / n
	t.Logf("outbox.jcs_canonicalize: %v per %d-byte document (%d docs)", per, len(doc), count)
	if count != n || per > 20*time.Millisecond {
		t.Fatalf("count=%d, %v per document", count, per)
	}
}

// D-2: go test ./tests/kernel -run '^$' -bench JCS
func BenchmarkJCSCanonicalizeSQL(b *testing.B) {
	ctx := context.Background()
	conn := testdb.Conn(b, testdb.URL(b), "outbox_producer")
	doc := string(jcsBenchDoc())
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE jcs_bench AS SELECT $1::text::json AS doc`, doc); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var s string
		if err := conn.QueryRow(ctx, `SELECT outbox.jcs_canonicalize(doc) FROM jcs_bench`).Scan(&s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJCSCanonicalizeGo(b *testing.B) {
	doc := jcsBenchDoc()
	for i := 0; i < b.N; i++ {
		if _, err := canon.Canonicalize(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// D-2: the canonicalizer works inside a parallel query (an auditor re-hashing a large table):
// its exception block must not run in a parallel worker.
func TestJCSInParallelQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.Conn(t, testdb.URL(t), "")
	for _, s := range []string{
		`CREATE TABLE public.par_docs AS SELECT i, json_build_object('n', i, 's', repeat('x', i % 50)) AS doc FROM generate_series(1, 20000) i`,
		`SET force_parallel_mode = on`, `SET parallel_setup_cost = 0`, `SET parallel_tuple_cost = 0`,
		`SET min_parallel_table_scan_size = 0`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var distinct int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT outbox.jcs_sha256(doc)) FROM public.par_docs
		WHERE outbox.jcs_canonicalize(doc) IS NOT NULL`).Scan(&n, &distinct); err != nil {
		t.Fatalf("JCS in a parallel query: %v", err)
	}
	if n != 20000 || distinct != 20000 {
		t.Fatalf("count %d, distinct digests %d", n, distinct)
	}
}
