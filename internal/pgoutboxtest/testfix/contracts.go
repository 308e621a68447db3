package testfix

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// ContractsDir is the repository's contracts/ seen from a test package under tests/ (the
// working directory of `go test`).
const ContractsDir = "../../contracts"

// Must fails the test on a non-nil err.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// LoadSchema decodes contracts/schemas/<name>.schema.json.
func LoadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ContractsDir, "schemas", name+".schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	Must(t, json.Unmarshal(b, &s))
	return s
}
