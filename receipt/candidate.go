package receipt

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// DigestCandidate returns the kind of a complete receipt document and the canonical
// (jcs-sha256-v1) text of its digest candidate: the receipt minus <prefix>Ref, <prefix>Digest
// and the kind's time field. sha256 of that text is the receipt's digest when the receipt is
// correct. It is the D-2 receipt hot path: passed to outbox.ack_delivery / ack_deliveries
// (pgcall.AckItem.ReceiptDigestCandidate), it lets the database check sha256(candidate) and that
// the candidate parses to exactly that part of the receipt instead of canonicalizing in
// PL/pgSQL. It does not validate the receipt (the database does, with or without a candidate);
// it fails only when the document is not canonicalizable, not an object, or its kind cannot be
// told from its field prefix (a kind of the catalog).
//
// One canonicalization: members are dropped from the receipt's canonical text, which stays
// canonical (JCS orders members, and removing some keeps the order of the others).
func (cat *Catalog) DigestCandidate(receipt []byte) (Kind, []byte, error) {
	c, err := canon.Canonicalize(receipt)
	if err != nil {
		return "", nil, invalid("%v", err)
	}
	members, err := topMembers(c)
	if err != nil {
		return "", nil, err
	}
	m := make(map[string]json.RawMessage, len(members))
	for _, mb := range members {
		m[mb.key] = nil
	}
	r, err := cat.kindOf(m)
	if err != nil {
		return "", nil, err
	}
	cand, err := candidateOf(c, r.Info)
	return r.Kind, cand, err
}

// candidateOf cuts <prefix>Ref, <prefix>Digest and the time field out of the canonical receipt
// text c: the canonical text of its digest candidate.
func candidateOf(c []byte, info Info) ([]byte, error) {
	members, err := topMembers(c)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(c))
	out = append(out, '{')
	for _, mb := range members {
		if mb.key == info.RefField() || mb.key == info.DigestField() || mb.key == info.TimeField {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, c[mb.start:mb.end]...)
	}
	return append(out, '}'), nil
}

// member is one top-level member of a canonical JSON object: its decoded key and the span
// c[start:end] of `"key":value`.
type member struct {
	key        string
	start, end int
}

var errNotObject = invalid("not a JSON object")

// topMembers lists the members of the canonical JSON object c (no whitespace, as
// canon.Canonicalize writes it).
func topMembers(c []byte) ([]member, error) {
	if len(c) < 2 || c[0] != '{' || c[len(c)-1] != '}' {
		return nil, errNotObject
	}
	var out []member
	i := 1
	for i < len(c)-1 {
		start := i
		kend, err := skipString(c, i)
		if err != nil {
			return nil, err
		}
		raw := c[i:kend]
		key := string(raw[1 : len(raw)-1])
		if strings.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal(raw, &key); err != nil {
				return nil, invalid("member name: %v", err)
			}
		}
		if kend >= len(c) || c[kend] != ':' {
			return nil, invalid("not canonical JSON")
		}
		vend, err := skipValue(c, kend+1)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, start: start, end: vend})
		i = vend
		if i < len(c)-1 {
			if c[i] != ',' {
				return nil, invalid("not canonical JSON")
			}
			i++
		}
	}
	return out, nil
}

var errTruncated = errors.New("receipt invalid: truncated canonical JSON")

// skipString returns the index just after the string starting at c[i] == '"'.
func skipString(c []byte, i int) (int, error) {
	if i >= len(c) || c[i] != '"' {
		return 0, invalid("not canonical JSON")
	}
	for j := i + 1; j < len(c); j++ {
		switch c[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errTruncated
}

// skipValue returns the index just after the value starting at c[i] (canonical: no whitespace).
func skipValue(c []byte, i int) (int, error) {
	if i >= len(c) {
		return 0, errTruncated
	}
	switch c[i] {
	case '"':
		return skipString(c, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(c); j++ {
			switch c[j] {
			case '"':
				e, err := skipString(c, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errTruncated
	default: // number, true, false, null
		j := i
		for j < len(c) && c[j] != ',' && c[j] != '}' && c[j] != ']' {
			j++
		}
		return j, nil
	}
}
