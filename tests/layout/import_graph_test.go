// Package layout checks the module's folders against the architecture they stand for (SPEC
// R-DP-8, issue 39): product code never imports the test harness, and internal/ holds only what
// users never touch, so it does not import the public packages built on it.
package layout

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/oceanway/pgoutbox"

// harness are the folders of test code: the harness packages, the public test kit (outboxtest,
// which users import from their own tests only, and which builds on the harness's template
// databases), the integration tests, the benchmarks and the soak runner. Everything else in the
// module is product code.
var harness = []string{"internal/pgoutboxtest", "outboxtest", "tests", "bench", "tools/soak"}

// internalMayImport are the public packages a package under internal/ may import, and why.
var internalMayImport = map[string]string{
	// The kernel's SQL: the migrations live in sql/ (tern, make migrate and reviewers read them
	// there) and sql/embed.go hands them to the migrator; it is data, not a Go API.
	"sql": "internal/migrate embeds the kernel's migrations",
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func isHarness(p string) bool {
	for _, h := range harness {
		if under(p, h) {
			return true
		}
	}
	return false
}

// graph is the module's import graph of the default build (no build tags): package → the
// module's packages it imports (tests' own imports excluded).
func graph(t *testing.T, tags ...string) map[string][]string {
	t.Helper()
	args := []string{"list"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		from := rel(f[0])
		g[from] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/") || imp == module {
				g[from] = append(g[from], rel(imp))
			}
		}
	}
	if len(g) < 20 {
		t.Fatalf("go list found %d packages: not the module", len(g))
	}
	return g
}

// R-DP-8: no product package depends on the test harness, directly or through another package
// (the failpoints reach the binaries only in test builds, -tags failpoints).
func TestProductNeverImportsHarness(t *testing.T) {
	t.Parallel()
	g := graph(t)
	var bad []string
	for p := range g {
		if isHarness(p) {
			continue
		}
		// depth-first over p's dependencies, remembering one path for the message
		seen := map[string]bool{}
		var walk func(q string, path []string)
		walk = func(q string, path []string) {
			for _, imp := range g[q] {
				if seen[imp] {
					continue
				}
				seen[imp] = true
				next := append(append([]string(nil), path...), imp)
				if isHarness(imp) {
					bad = append(bad, strings.Join(next, " -> "))
					continue
				}
				walk(imp, next)
			}
		}
		walk(p, []string{p})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("product code depends on the test harness: %s", b)
	}
	// The check can fail: the failpoint build of the dispatcher does import the harness.
	if tagged := graph(t, "failpoints"); !contains(tagged["cmd/dispatcher"], "internal/pgoutboxtest/failpoint") {
		t.Errorf("cmd/dispatcher built with -tags failpoints does not import the failpoints: the check above sees nothing")
	}
}

// R-DP-8: internal/ keeps only what users never touch, built below the public packages: no
// package under internal/ (harness aside) imports a public package of the module, except the
// ones listed in internalMayImport.
func TestInternalImportsNoPublicPackage(t *testing.T) {
	t.Parallel()
	g := graph(t)
	for p, imps := range g {
		if !under(p, "internal") || isHarness(p) {
			continue
		}
		for _, imp := range imps {
			if under(imp, "internal") {
				continue
			}
			if _, ok := internalMayImport[imp]; !ok {
				t.Errorf("%s imports the public package %s (internal/ must not depend on public packages)", p, imp)
			}
		}
	}
}

// R-DP-8: what users run or extend is public (not under internal/).
func TestUserFacingPackagesArePublic(t *testing.T) {
	t.Parallel()
	g := graph(t)
	for _, p := range []string{"dispatcher", "transport", "mailbox", "mailbox/pump", "consumer", "producer", "receipt", "wire"} {
		if _, ok := g[p]; !ok {
			t.Errorf("package %s/%s does not exist", module, p)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The product dispatcher carries no failpoints: asked for them, it refuses to start (exit 2)
// and says that they exist only in test builds.
func TestProductDispatcherRefusesFailpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "dispatcher")
	build := exec.Command("go", "build", "-o", bin, module+"/cmd/dispatcher")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "d.toml")
	if err := os.WriteFile(cfg, []byte("mode = \"development\"\n[destinations.d]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Env = []string{"PGOUTBOX_DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "PGOUTBOX_TEST_MODE=1", "PGOUTBOX_FAILPOINTS=after_claim=kill"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "built without failpoints") {
		t.Fatalf("product dispatcher with PGOUTBOX_FAILPOINTS: %v, output %q; want exit 2, built without failpoints", err, out)
	}
}
