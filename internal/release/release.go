// Package release turns a DeliverySetDefinition@1 file without a digest (as kept in
// sql/releases/) into the complete document: it computes deliverySetDefinitionDigest over the
// digest candidate with jcs-sha256-v1 (SPEC R-DS-3). Nobody writes a digest by hand.
package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/oceanway/pgoutbox/internal/canon"
	sqlfiles "github.com/oceanway/pgoutbox/sql"
)

// ReferencePath is the OceanWay first release (SPEC §3.4) inside the sql/ tree.
const ReferencePath = "releases/oceanway-first-release.v1.json"

// ReferenceSourceRelease is the source_release label the demo and tests register it with.
const ReferenceSourceRelease = "oceanway-first-release"

const digestField = "deliverySetDefinitionDigest"

// LoadReference returns the reference release with its digest.
func LoadReference() (json.RawMessage, error) {
	b, err := fs.ReadFile(sqlfiles.FS, ReferencePath)
	if err != nil {
		return nil, err
	}
	return WithDigest(b)
}

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

// RetargetProjection returns the reference release doc (with its digest) as delivery-set version
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
