package receipt

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// The hot path of Build and Parse (issue 36 item 2): a receipt is a flat object of strings,
// integers and booleans (R-AK-1a, closed documents), so its RFC 8785 canonical text is written
// directly — members sorted by name, strings with the minimal JSON escapes, integers in decimal —
// instead of marshalling a map and canonicalizing the result (three canonicalizations per Build
// before). The candidate, the receipt and the ack are each written once from the same encoded
// values. Anything outside that shape (a member name that is not ASCII, a string that is not
// valid UTF-8, a value of another Go type, an integer beyond ±(2^53-1)) takes the general path
// (json.Marshal + canon), which accepts or refuses it exactly as before; TestFastBuildMatchesParse
// and TestCanonicalStringMatchesJCS hold the two paths byte-identical.

// flatMember is one member of a flat object: its name and its canonical value text.
type flatMember struct {
	key string
	val []byte
}

// canonicalValue returns the canonical text of a receipt member value, false when the value is
// outside the fast path's shape.
func canonicalValue(v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return appendCanonicalString(nil, x)
	case bool:
		return strconv.AppendBool(nil, x), true
	case int:
		return canonicalInt(int64(x))
	case int8:
		return canonicalInt(int64(x))
	case int16:
		return canonicalInt(int64(x))
	case int32:
		return canonicalInt(int64(x))
	case int64:
		return canonicalInt(x)
	case uint:
		return canonicalUint(uint64(x))
	case uint8:
		return canonicalUint(uint64(x))
	case uint16:
		return canonicalUint(uint64(x))
	case uint32:
		return canonicalUint(uint64(x))
	case uint64:
		return canonicalUint(x)
	}
	return nil, false
}

func canonicalInt(n int64) ([]byte, bool) {
	if n > canon.MaxSafeInteger || n < -canon.MaxSafeInteger {
		return nil, false
	}
	return strconv.AppendInt(nil, n, 10), true
}

func canonicalUint(n uint64) ([]byte, bool) {
	if n > canon.MaxSafeInteger {
		return nil, false
	}
	return strconv.AppendUint(nil, n, 10), true
}

const hexDigits = "0123456789abcdef"

// appendCanonicalString appends s as an RFC 8785 string: '"' and '\' escaped, \b \f \n \r \t
// for those controls, \u00xx (lower-case hex) for the other controls below U+0020, every other
// character literally (UTF-8). False when s is not valid UTF-8 or holds U+0000 (outside the
// jcs-sha256-v1 subset: PostgreSQL json cannot hold it; the general path refuses it).
func appendCanonicalString(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return nil, false
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(dst, '"'), true
}

// asciiName: member names of the fast path are ASCII without characters that need escaping, so
// their byte order is RFC 8785's UTF-16 order and they are written as they are.
func asciiName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// writeFlat writes the canonical object of ms (sorted by key in place), leaving out the keys
// skip reports.
func writeFlat(dst []byte, ms []flatMember, skip func(string) bool) []byte {
	dst = append(dst, '{')
	first := true
	for _, m := range ms {
		if skip != nil && skip(m.key) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, m.key...)
		dst = append(dst, '"', ':')
		if m.val == nil {
			dst = append(dst, "null"...) // what json.Marshal writes for a missing json.RawMessage
		} else {
			dst = append(dst, m.val...)
		}
	}
	return append(dst, '}')
}

func sortFlat(ms []flatMember) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
}

// buildFast writes the receipt doc (every member but ref, digest and time, which it adds) and
// its ack canonically. ok is false when doc is outside the fast path's shape: the caller then
// takes the general path.
func (c *Catalog) buildFast(r *rules, doc map[string]any, ref, timeText string) (Document, bool) {
	info := r.Info
	ms := make([]flatMember, 0, len(doc)+3)
	for k, v := range doc {
		if !asciiName(k) {
			return Document{}, false
		}
		val, ok := canonicalValue(v)
		if !ok {
			return Document{}, false
		}
		ms = append(ms, flatMember{k, val})
	}
	refText, ok := appendCanonicalString(nil, ref)
	if !ok || !timeRE.MatchString(timeText) || !asciiName(info.RefField()) || !asciiName(info.TimeField) ||
		!asciiName(info.DigestField()) || !asciiName(string(info.Kind)) {
		return Document{}, false
	}
	sortFlat(ms)
	cand := writeFlat(make([]byte, 0, 512), ms, nil)
	digest := canon.SumHex(cand)
	ms = append(ms,
		flatMember{info.RefField(), refText},
		flatMember{info.TimeField, []byte(`"` + timeText + `"`)},
		flatMember{info.DigestField(), []byte(`"` + digest + `"`)})
	// The kind must be recognisable from the document (Parse's rule): no member of another
	// kind's prefixed fields.
	keys := make(map[string]json.RawMessage, len(ms))
	vals := make(map[string][]byte, len(ms))
	for _, m := range ms {
		keys[m.key] = nil
		vals[m.key] = m.val
	}
	if k, err := c.kindOf(keys); err != nil || k != r {
		return Document{}, false
	}
	sortFlat(ms)
	rec := writeFlat(make([]byte, 0, len(cand)+160), ms, nil)
	return Document{Kind: info.Kind, Ref: ref, Digest: digest, Receipt: rec, Ack: ackFromValues(vals, info), Candidate: cand}, true
}

// ackFromValues writes the canonical ActiveConsumerAck@1 of a receipt from its members'
// canonical value texts (the same document ackOf marshals and canonicalizes).
func ackFromValues(vals map[string][]byte, info Info) json.RawMessage {
	kind, _ := appendCanonicalString(nil, string(info.Kind))
	applied := []flatMember{
		{"kind", kind},
		{info.RefField(), vals[info.RefField()]},
		{info.SchemaVersionField(), vals[info.SchemaVersionField()]},
		{info.AlgorithmField(), vals[info.AlgorithmField()]},
		{info.DigestField(), vals[info.DigestField()]},
	}
	sortFlat(applied)
	ap := writeFlat(make([]byte, 0, 256), applied, nil)
	ack := []flatMember{
		{"appliedReceipt", ap},
		{"consumerName", vals["consumerName"]},
		{"destination", vals["destination"]},
		{"eventEnvelopeDigestAlgorithmVersion", vals["eventEnvelopeDigestAlgorithmVersion"]},
		{"eventEnvelopeSha256", vals["eventEnvelopeSha256"]},
		{"eventId", vals["eventId"]},
	}
	sortFlat(ack)
	return writeFlat(make([]byte, 0, len(ap)+320), ack, nil)
}
