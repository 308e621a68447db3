// Package vectors locates the RFC 8785 golden vectors vendored in internal/pgoutboxtest/vectors/testdata
// (origins and licences in its README.md) for the tests of both canonicalizers (T-6).
package vectors

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the vendored vectors folder. It never skips: a missing folder fails the test.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above " + file)
		}
		dir = parent
	}
	v := filepath.Join(dir, "internal", "pgoutboxtest", "vectors", "testdata")
	if _, err := os.Stat(filepath.Join(v, "rfc8785", "input")); err != nil {
		t.Fatalf("golden vectors missing: %v", err)
	}
	return v
}
