package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/vectors"
)

// D-2, T-6: canonicalization is idempotent, its output is valid JSON, and every rejection wraps
// ErrNotCanonicalizable. The seed corpus (vectors plus tricky cases) runs under plain `go test`.
func FuzzCanonicalizeIdempotent(f *testing.F) {
	v := vectors.Dir(f)
	for _, sub := range []string{"rfc8785", "gowebpki-extra"} {
		files, _ := filepath.Glob(filepath.Join(v, sub, "input", "*.json"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		`56.0`, `1E2`, `-0`, `9007199254740991`, `9007199254740992`, `1.5`, `{"a":1,"a":2}`,
		`{"\ud83d\ude02":1,"\ufb33":2}`, `"\u0000"`, `"\ud800"`, `[[[[]]]]`, `{"a":{"b":[1,{"c":null}]}}`,
		` "x" `, `"\u00e9\u0065\u0301"`, `{"":0,"\u007f":1,"\u0080":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c1, err := Canonicalize(doc)
		if err != nil {
			if !errors.Is(err, ErrNotCanonicalizable) {
				t.Fatalf("rejection does not wrap ErrNotCanonicalizable: %v", err)
			}
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("canonical output is not valid JSON: %q", c1)
		}
		c2, err := Canonicalize(c1)
		if err != nil {
			t.Fatalf("canonical output %q rejected: %v", c1, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent:\n c1 %q\n c2 %q", c1, c2)
		}
	})
}
