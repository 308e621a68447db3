package readmodel

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-OP-2: the CompletenessProofManifest@2 golden (migration 037; @1 proofs stored before it stay
// verifiable, contracts/schemas keeps their schema). A fixed state (two events with fixed ids and
// times, both delivered) gives byte-identical manifests on every run (deterministic,
// content-addressed): the canonical text and its sha256 equal contracts/golden; the document
// follows contracts/schemas/CompletenessProofManifest@2.schema.json. Run with -update-goldens
// after a deliberate contract change.
func TestCompletenessManifestGolden(t *testing.T) {
	t.Parallel()
	b := rmSetup(t)
	for _, e := range []struct{ id, typ, sv, agg string }{
		{"0b7c2f52-3c1e-4c55-9d5e-8f2f1b7a9c01", kernelfix.RunCreated, "2.0", "run-0001"},
		{"5d0c1a8e-7f3b-4e2a-9c6d-1b2a3c4d5e6f", kernelfix.Metering, "1", "attempt-0001"},
	} {
		env := testfix.Envelope(e.typ, e.sv, e.agg, 1)
		env["eventId"], env["occurredAt"] = e.id, "2026-12-01T07:59:59.000001Z"
		env["payload"] = map[string]any{"note": "golden"}
		env["operationId"], env["correlationId"], env["causationId"] = "op-0001", "corr-0001", "cause-0001"
		testfix.Append(t, b.Admin, env)
	}
	rmDrain(t, b)
	s := rmTake(t, b.aud, `{}`)
	m := rmRead(t, b.aud, s)
	if s.Status != rmComplete {
		t.Fatalf("golden state is %s", s.Status)
	}
	dir := filepath.Join(testfix.ContractsDir, "golden", "completeness-proof-manifest.reference")
	var pretty bytes.Buffer
	testfix.Must(t, json.Indent(&pretty, m.Raw, "", "  "))
	if *updateGoldens {
		testfix.Must(t, os.MkdirAll(dir, 0o755))
		testfix.Must(t, os.WriteFile(filepath.Join(dir, "document.json"), append(pretty.Bytes(), '\n'), 0o644))
		testfix.Must(t, os.WriteFile(filepath.Join(dir, "canonical.json"), m.Raw, 0o644))
		testfix.Must(t, os.WriteFile(filepath.Join(dir, "sha256.txt"), []byte(s.ManifestSHA256+"\n"), 0o644))
	}
	wantCanon, err := os.ReadFile(filepath.Join(dir, "canonical.json"))
	if err != nil {
		t.Fatalf("%v (run go test ./tests/readmodel -run TestCompletenessManifestGolden -update-goldens)", err)
	}
	wantSHA, _ := os.ReadFile(filepath.Join(dir, "sha256.txt"))
	if string(wantCanon) != string(m.Raw) || strings.TrimSpace(string(wantSHA)) != s.ManifestSHA256 {
		t.Fatalf("manifest differs from the golden:\n got  %s\n want %s", m.Raw, wantCanon)
	}
	schemas := kernelfix.CompileContractSchemas(t)
	sc, ok := schemas["CompletenessProofManifest@2"]
	if !ok {
		t.Fatal("no CompletenessProofManifest@2 schema")
	}
	for _, f := range []string{"document.json", "canonical.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		testfix.Must(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		testfix.Must(t, err)
		if err := sc.Validate(doc); err != nil {
			t.Fatalf("%s does not follow the schema: %v", f, err)
		}
	}
	// The schema is closed: a member added to the document is refused.
	var extra map[string]any
	testfix.Must(t, json.Unmarshal(m.Raw, &extra))
	extra["takenAt"] = "2026-12-01T08:00:00Z"
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(kernelfix.MustJSON(t, extra)))
	if sc.Validate(doc) == nil {
		t.Fatal("the schema accepts a time inside the digested document")
	}
}
