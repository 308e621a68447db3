package kernelfix

import (
	"encoding/json"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// MutateRelease decodes the reference release, applies f, and returns the document with a
// correctly computed digest (so that only the rule under test is broken).
func MutateRelease(t *testing.T, f func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(testfix.ReferenceRelease(t), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "deliverySetDefinitionDigest")
	f(m)
	d, err := canon.Digest(m)
	if err != nil {
		d = Zeros64 // not canonicalizable: the database must refuse it before looking at the digest
	}
	m["deliverySetDefinitionDigest"] = d
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Members is the "members" array of a release document.
func Members(m map[string]any) []any { return m["members"].([]any) }

// Zeros64 is a well-formed SHA-256 hex digest that matches nothing.
const Zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"
