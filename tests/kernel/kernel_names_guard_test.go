package kernel

// SPEC D-1: the kernel names no domain. No kernel file - SQL under sql/ other than the released
// migrations 001..040 (frozen history), Go outside reference/, examples/, tests/, tools/,
// bench/, cmd/refconsumer and internal/pgoutboxtest, test files excluded - names a reference
// destination, receipt kind, consumer, refinement event type or reference table. Known
// offenders being removed on other branches are listed in kgExempt with the reason; an entry
// that no longer offends fails the test too, so the list only shrinks.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// kgNames are the reference release's names (reference/, SPEC §3.4).
var kgNames = []string{
	// destinations and receipt kinds
	"core_operations", "metering_input_processor", "billing_finalization_coordinator", "billing_settlement_catch_up",
	"operations_projection",
	// consumers
	"operations_projector", "metering_input_processor_consumer", "billing_finalization_coordinator_consumer",
	"billing_settlement_catch_up_consumer",
	// envelope refinements
	"run.created@2.0", "wallet.reserved@2.0",
	// the reference mailbox effect's tables
	"ref_effects", "ref_key_sequences",
}

// kgExempt: kernel files allowed to name reference names, and why (paths relative to the
// repository root, slash-separated).
var kgExempt = map[string]string{
	// permanent: the migration that deletes the seeded reference rows has to name them
	"sql/041_kernel_seeds_no_domain.sql": "removes the reference rows the released migrations seeded",
}

var kgReleased = regexp.MustCompile(`^sql/0(0[1-9]|[1-3][0-9]|40)_[^/]*\.sql$`)

func kgKernelFile(rel string) bool {
	switch {
	case strings.HasSuffix(rel, ".sql"):
		return strings.HasPrefix(rel, "sql/") && !kgReleased.MatchString(rel)
	case strings.HasSuffix(rel, ".go"):
		if strings.HasSuffix(rel, "_test.go") {
			return false
		}
		for _, p := range []string{"reference/", "examples/", "tests/", "tools/", "bench/", "cmd/refconsumer/", "internal/pgoutboxtest/"} {
			if strings.HasPrefix(rel, p) {
				return false
			}
		}
		return true
	}
	return false
}

func TestKernelNamesNoReferenceDomain(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	offends := map[string][]string{}
	scanned := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "vendor" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !kgKernelFile(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned++
		for _, n := range kgNames {
			if strings.Contains(string(b), n) {
				offends[rel] = append(offends[rel], n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d kernel files: the walk missed the repository", scanned)
	}
	var bad []string
	for rel, names := range offends {
		if _, ok := kgExempt[rel]; !ok {
			bad = append(bad, rel+": "+strings.Join(names, ", "))
		}
	}
	for rel := range kgExempt {
		if _, ok := offends[rel]; !ok {
			bad = append(bad, rel+": exempt but names no reference name any more - remove it from kgExempt")
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("kernel files naming the reference domain (SPEC D-1):\n%s", strings.Join(bad, "\n"))
	}
}
