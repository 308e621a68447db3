package kernelfix

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// CompileContractSchemas compiles every JSON schema of contracts/schemas, keyed by name.
func CompileContractSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	files, err := filepath.Glob(filepath.Join(testfix.ContractsDir, "schemas", "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("schemas: %v", err)
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		id := "file:///" + filepath.Base(f)
		if err := comp.AddResource(id, doc); err != nil {
			t.Fatal(err)
		}
		s, err := comp.Compile(id)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".schema.json")] = s
	}
	return out
}

// MustJSON marshals v; the test fails on error.
func MustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
