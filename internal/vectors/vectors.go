// Package vectors locates the shared RFC 8785 golden vectors (../shared/vectors beside the
// repository, SPEC T-6) for the tests of both canonicalizers.
package vectors

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns ../shared/vectors relative to the repository root (the directory holding go.mod).
// A test is skipped only when that folder is absent.
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
	v := filepath.Join(dir, "..", "shared", "vectors")
	if _, err := os.Stat(v); os.IsNotExist(err) {
		t.Skipf("golden vectors folder %s absent", v)
	}
	return v
}
