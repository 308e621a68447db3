package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every requirement id the repository cites (in SQL, Go and docs) is listed with one line in
// docs/requirements.md, so a citation always leads somewhere (issue 23 item 5).
func TestRequirementIdsListed(t *testing.T) {
	root := ".."
	list, err := os.ReadFile(filepath.Join(root, "docs", "requirements.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^- \*\*([A-Z]+(?:-[A-Z]+)?-[0-9]+[a-z]?)\*\*`).FindAllStringSubmatch(string(list), -1) {
		listed[m[1]] = true
	}
	if len(listed) < 50 {
		t.Fatalf("docs/requirements.md lists only %d ids", len(listed))
	}
	id := regexp.MustCompile(`\b(R-[A-Z]+-[0-9]+[a-z]?|(?:D|T|P|HP)-[0-9]+)\b`)
	missing := map[string]string{}
	for _, dir := range []string{"sql", "internal", "cmd", "consumer", "reference", "mailbox", "tests", "wire", "producer", "intake", "receipt", "docs", "bench"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "baseline" {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(p) {
			case ".go", ".sql", ".md", ".js", ".sh":
			default:
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range id.FindAllString(string(b), -1) {
				if !listed[m] {
					missing[m] = p
				}
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if len(missing) > 0 {
		var ids []string
		for k, p := range missing {
			ids = append(ids, k+" ("+p+")")
		}
		sort.Strings(ids)
		t.Fatalf("cited but not listed in docs/requirements.md: %s", strings.Join(ids, ", "))
	}
}
