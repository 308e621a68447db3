// Package release turns a DeliverySetDefinition@1 file without a digest (as the reference
// release is kept in reference/releases/) into the complete document: it computes
// deliverySetDefinitionDigest over the digest candidate with jcs-sha256-v1 (SPEC R-DS-3).
// Nobody writes a digest by hand. It knows no particular release: the reference release's
// documents and loaders live in the reference package.
package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/oceanway/pgoutbox/internal/canon"
)

const digestField = "deliverySetDefinitionDigest"

// LoadFile reads a definition file and returns it with its digest.
func LoadFile(path string) (json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return WithDigest(b)
}

// WithDigest computes the digest of the candidate (the document minus its digest field) and
// returns the canonical bytes of the complete document. A document that already carries a
// digest is refused: a digest is computed, never copied.
func WithDigest(doc []byte) (json.RawMessage, error) {
	if _, err := canon.Canonicalize(doc); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("definition is not a JSON object: %w", err)
	}
	if _, ok := m[digestField]; ok {
		return nil, errors.New("definition file already carries " + digestField + ": keep release files without it")
	}
	candidate, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	digest, err := canon.SHA256Hex(candidate)
	if err != nil {
		return nil, err
	}
	m[digestField], _ = json.Marshal(digest)
	full, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return canon.Canonicalize(full)
}

// RetargetProjection returns a release doc (with its digest) as delivery-set version
// setVersion whose members that target projection name now target projectionVersion, with the
// digest computed anew: the delivery set a projection cutover activates (SPEC R-PV-2).
func RetargetProjection(doc json.RawMessage, setVersion int, name string, projectionVersion int) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	delete(m, digestField)
	m["deliverySetVersion"] = setVersion
	members, _ := m["members"].([]any)
	n := 0
	for _, x := range members {
		pt, _ := x.(map[string]any)["projectionTarget"].(map[string]any)
		if pt != nil && pt["projectionName"] == name {
			pt["projectionVersion"] = projectionVersion
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no member targets projection %s", name)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return WithDigest(b)
}
