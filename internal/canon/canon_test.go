package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/vectors"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// D-2, T-6: every accepted golden vector canonicalizes byte for byte to its expected output.
func TestCanonGoldenVectors(t *testing.T) {
	t.Parallel()
	v := vectors.Dir(t)
	cases := map[string]string{}
	for _, n := range []string{"arrays", "french", "structures", "unicode", "weird"} {
		cases[filepath.Join(v, "rfc8785")+"/"+n+".json"] = n
	}
	for _, n := range []string{"false", "null", "simpleString", "true"} {
		cases[filepath.Join(v, "gowebpki-extra")+"/"+n+".json"] = n
	}
	if len(cases) != 9 {
		t.Fatalf("want 9 vectors, have %d", len(cases))
	}
	for path := range cases {
		dir, name := filepath.Split(path)
		in := readFile(t, filepath.Join(dir, "input", name))
		want := readFile(t, filepath.Join(dir, "output", name))
		got, err := Canonicalize(in)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", path, got, want)
		}
	}
}

// valuesWithoutNumbers is output/values.json with its "numbers" member removed, written by hand
// and checked against the vector file in TestCanonValuesVector.
const valuesWithoutNumbers = `{"literals":[null,true,false],"string":"€$\u000f\nA'B\"\\\\\"/"}`

// D-2, T-6: values.json holds non-integers and is rejected as a whole; without "numbers" it
// matches the expected output with that member removed.
func TestCanonValuesVector(t *testing.T) {
	t.Parallel()
	v := filepath.Join(vectors.Dir(t), "rfc8785")
	in := readFile(t, filepath.Join(v, "input", "values.json"))
	out := readFile(t, filepath.Join(v, "output", "values.json"))
	if _, err := Canonicalize(in); !errors.Is(err, ErrNotCanonicalizable) {
		t.Fatalf("values.json: err = %v, want ErrNotCanonicalizable", err)
	}
	// The hand-written literal equals the vector output with the member spliced out.
	const numbers = `"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],`
	if !bytes.Contains(out, []byte(numbers)) {
		t.Fatalf("output/values.json lacks %s", numbers)
	}
	if spliced := bytes.Replace(out, []byte(numbers), nil, 1); string(spliced) != valuesWithoutNumbers {
		t.Fatalf("spliced output %s != literal %s", spliced, valuesWithoutNumbers)
	}
	noNumbers := removeNumbersLine(t, in)
	got, err := Canonicalize(noNumbers)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != valuesWithoutNumbers {
		t.Fatalf("got %s, want %s", got, valuesWithoutNumbers)
	}
}

// removeNumbersLine drops the `"numbers": [...],` line of input/values.json textually.
func removeNumbersLine(t testing.TB, in []byte) []byte {
	t.Helper()
	lines := strings.Split(string(in), "\n")
	var kept []string
	for _, l := range lines {
		if !strings.Contains(l, `"numbers"`) {
			kept = append(kept, l)
		}
	}
	if len(kept) != len(lines)-1 {
		t.Fatalf("expected exactly one numbers line in values.json")
	}
	return []byte(strings.Join(kept, "\n"))
}

// D-2: the accepted and rejected subset, case by case.
func TestCanonSubset(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		`56.0`:                          `56`,
		`1E2`:                           `100`,
		`-0`:                            `0`,
		`-0.0e-7`:                       `0`,
		`0.5e1`:                         `5`,
		`1e15`:                          `1000000000000000`,
		`9007199254740991`:              `9007199254740991`,
		`-9007199254740991`:             `-9007199254740991`,
		`90071992547409910e-1`:          `9007199254740991`,
		`0e999999999999999999999`:       `0`,
		` {"b" : [1, 2.0] , "a":"x"} `:  `{"a":"x","b":[1,2]}`,
		`{"\ud83d\ude02":1,"\ufb33":2}`: "{\"\U0001F602\":1,\"\uFB33\":2}", // UTF-16 order: U+1F602 before U+FB33
		`{"\ufb33":2,"\ud83d\ude02":1}`: "{\"\U0001F602\":1,\"\uFB33\":2}",
		`"\u001f\u007f\/"`:              `"\u001f` + "\x7f" + `/"`,
		`[]`:                            `[]`,
		`{}`:                            `{}`,
		`{"a":{"a":1}}`:                 `{"a":{"a":1}}`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64): strings.Repeat("[", 64) + strings.Repeat("]", 64),
		// R-SEC-5: a member name of exactly 1024 characters (ASCII, escaped, multi-byte) is accepted.
		`{"` + strings.Repeat("a", 1024) + `":1}`:      `{"` + strings.Repeat("a", 1024) + `":1}`,
		`{"` + strings.Repeat(`\u0061`, 1024) + `":1}`: `{"` + strings.Repeat("a", 1024) + `":1}`,
		`{"` + strings.Repeat("\uffff", 1024) + `":1}`: `{"` + strings.Repeat("\uffff", 1024) + `":1}`,
	}
	for in, want := range ok {
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Errorf("%q: unexpected error %v", in, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	bad := []string{
		`9007199254740992`, `-9007199254740992`, `1e16`, `1.5`, `0.1`, `1E-1`, `4.50`, `1e400`,
		`9007199254740991.5`, `1.0000000000000000000001`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `[{"x":{"k":1,"k":1}}]`,
		`"\u0000"`, `{"\u0000":1}`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`,
		strings.Repeat("[", 65) + strings.Repeat("]", 65),
		`{"` + strings.Repeat("a", 1025) + `":1}`, `{"` + strings.Repeat(`\u0061`, 1025) + `":1}`,
		`{"` + strings.Repeat("\u00e9", 1025) + `":1}`, `[{"x":{"` + strings.Repeat("!", 3000) + `":1}}]`,
		strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
		"\"\xff\"", "\"\xed\xa0\x80\"", `{"a":1} x`, `[1,]`, `{"a":1,}`, `01`, `+1`, `.5`, `1.`, `1e`,
		`NaN`, `"\x"`, "\"a\tb\"", ``, ` `, `[1 2]`, `tru`, `nul`, `{"a"}`, `{1:2}`, `"abc`,
	}
	for _, in := range bad {
		if got, err := Canonicalize([]byte(in)); !errors.Is(err, ErrNotCanonicalizable) {
			t.Errorf("%q: got %q, err %v; want ErrNotCanonicalizable", in, got, err)
		}
	}
}

// D-2: SHA256Hex is the lower-case hex SHA-256 of the canonical bytes; Digest marshals first.
func TestCanonDigest(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"b":2, "a":[true,null,"x"]}`)
	sum := sha256.Sum256([]byte(`{"a":[true,null,"x"],"b":2}`))
	want := hex.EncodeToString(sum[:])
	got, err := SHA256Hex(doc)
	if err != nil || got != want {
		t.Fatalf("SHA256Hex = %q, %v; want %q", got, err, want)
	}
	d, err := Digest(map[string]any{"b": 2, "a": []any{true, nil, "x"}})
	if err != nil || d != want {
		t.Fatalf("Digest = %q, %v; want %q", d, err, want)
	}
	if _, err := Digest(map[string]any{"amount": 1.5}); !errors.Is(err, ErrNotCanonicalizable) {
		t.Fatalf("Digest(1.5): err = %v, want ErrNotCanonicalizable", err)
	}
	if _, err := SHA256Hex([]byte(`{"a":1,"a":1}`)); !errors.Is(err, ErrNotCanonicalizable) {
		t.Fatalf("SHA256Hex(dup): err = %v, want ErrNotCanonicalizable", err)
	}
}
