// Package canon computes the kernel's canonical JSON and `jcs-sha256-v1` digests (SPEC D-2):
// RFC 8785 (JCS) canonical bytes, restricted to a subset that the PL/pgSQL twin
// (outbox.jcs_canonicalize / outbox.jcs_sha256, sql/functions/outbox/) implements byte for byte:
//
//   - numbers must denote integers with |n| <= 2^53-1 (written any way JSON allows: 56.0, 1E2
//     and -0 are accepted and canonicalize to 56, 100 and 0); any other number is rejected;
//   - member names must be unique within an object (compared after unescaping);
//   - strings must not hold U+0000 (PostgreSQL's json functions cannot represent it) nor unpaired
//     surrogate escapes;
//   - objects and arrays may nest at most MaxDepth levels;
//   - member names may be at most MaxMemberNameChars characters long (R-SEC-5);
//   - the input must be one well-formed JSON text in valid UTF-8, with nothing after it.
//
// The canonical transform itself is github.com/gowebpki/jcs; this package adds a strict
// validation pass in front of it that enforces the subset exactly as the SQL side does. Every
// rejection wraps ErrNotCanonicalizable (the Go mirror of SQLSTATE OB201).
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Algorithm is the digest algorithm version stored with every digest (SPEC D-2).
const Algorithm = "jcs-sha256-v1"

// MaxDepth is the deepest allowed nesting of objects and arrays (the document's top-level
// container is level 1). The SQL side uses the same bound.
const MaxDepth = 64

// MaxMemberNameChars is the longest allowed member name, in characters (Unicode code points,
// counted after unescaping) — the bound outbox._jcs_value enforces (R-SEC-5).
const MaxMemberNameChars = 1024

// MaxSafeInteger is 2^53-1, the largest magnitude a number in a digested document may have.
const MaxSafeInteger = 1<<53 - 1

// ErrNotCanonicalizable is wrapped by every rejection (SQLSTATE OB201 on the SQL side).
var ErrNotCanonicalizable = errors.New("document not canonicalizable (jcs-sha256-v1)")

// Canonicalize returns the RFC 8785 canonical bytes of doc, or an error wrapping
// ErrNotCanonicalizable when doc is not JSON or falls outside the jcs-sha256-v1 subset.
func Canonicalize(doc []byte) ([]byte, error) {
	if err := validate(doc); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(doc)
	if err != nil {
		// Not expected after validation; still a rejection, never a panic.
		return nil, fmt.Errorf("%w: %v", ErrNotCanonicalizable, err)
	}
	return out, nil
}

// SHA256Hex returns the jcs-sha256-v1 digest of doc: 64 lower-case hex digits of the SHA-256
// of its canonical bytes (outbox.jcs_sha256 in SQL).
func SHA256Hex(doc []byte) (string, error) {
	c, err := Canonicalize(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalizeDigest returns the canonical bytes of doc and their jcs-sha256-v1 digest with a
// single canonicalization (the hot path: Canonicalize followed by SHA256Hex would canonicalize
// twice).
func CanonicalizeDigest(doc []byte) ([]byte, string, error) {
	c, err := Canonicalize(doc)
	if err != nil {
		return nil, "", err
	}
	return c, SumHex(c), nil
}

// SumHex is the lower-case hex SHA-256 of bytes that are already canonical.
func SumHex(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// Digest marshals v with encoding/json and returns the jcs-sha256-v1 digest of the result.
// Go floats that are not safe integers are rejected like any other number outside the subset.
func Digest(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: marshal: %v", ErrNotCanonicalizable, err)
	}
	return SHA256Hex(b)
}

// Validate checks doc against the jcs-sha256-v1 subset (strict RFC 8259: valid UTF-8, no
// duplicate member names, no U+0000, integers with |n| <= 2^53-1 only, member names of at most
// MaxMemberNameChars) without canonicalizing it: what Canonicalize refuses, Validate refuses with
// the same error. It does not check that doc is in canonical form.
func Validate(doc []byte) error { return validate(doc) }

// validate checks doc against the jcs-sha256-v1 subset with a strict RFC 8259 scanner.
func validate(doc []byte) error {
	s := scanner{data: doc}
	s.skipWS()
	if err := s.value(0); err != nil {
		return err
	}
	s.skipWS()
	if s.pos != len(s.data) {
		return s.fail("unexpected data after the JSON value")
	}
	return nil
}

type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s (at byte offset %d)", ErrNotCanonicalizable, fmt.Sprintf(format, args...), s.pos)
}

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one JSON value; depth is the number of containers enclosing it.
func (s *scanner) value(depth int) error {
	if s.pos >= len(s.data) {
		return s.fail("unexpected end of JSON input")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.fail("invalid character %q looking for a JSON value", c)
	}
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.fail("invalid literal, want %s", lit)
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) object(level int) error {
	if level > MaxDepth {
		return s.fail("objects and arrays nested deeper than %d levels", MaxDepth)
	}
	s.pos++ // '{'
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	seen := make(map[string]struct{})
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("expected a member name string")
		}
		start := s.pos
		name, err := s.str()
		if err != nil {
			return err
		}
		if n := utf8.RuneCountInString(name); n > MaxMemberNameChars {
			s.pos = start
			return s.fail("member name of %d characters, longer than %d", n, MaxMemberNameChars)
		}
		if _, dup := seen[name]; dup {
			s.pos = start
			return s.fail("duplicate member name %q", name)
		}
		seen[name] = struct{}{}
		s.skipWS()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("expected ':' after member name")
		}
		s.pos++
		s.skipWS()
		if err := s.value(level); err != nil {
			return err
		}
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.fail("unexpected end of JSON input in object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipWS()
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or '}' in object")
		}
	}
}

func (s *scanner) array(level int) error {
	if level > MaxDepth {
		return s.fail("objects and arrays nested deeper than %d levels", MaxDepth)
	}
	s.pos++ // '['
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for {
		if err := s.value(level); err != nil {
			return err
		}
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.fail("unexpected end of JSON input in array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipWS()
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or ']' in array")
		}
	}
}

// str scans a string starting at the opening quote and returns its decoded value.
func (s *scanner) str() (string, error) {
	s.pos++ // '"'
	var b []byte
	for {
		if s.pos >= len(s.data) {
			return "", s.fail("unterminated string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(b), nil
		case c < 0x20:
			return "", s.fail("unescaped control character 0x%02x in string", c)
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return "", s.fail("unterminated escape")
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := s.hex4()
				if err != nil {
					return "", err
				}
				switch {
				case r == 0:
					return "", s.fail(`string holds \u0000, which PostgreSQL json cannot represent`)
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", s.fail(`unpaired low surrogate \u%04x`, r)
				case r >= 0xD800 && r <= 0xDBFF:
					if s.pos+1 >= len(s.data) || s.data[s.pos] != '\\' || s.data[s.pos+1] != 'u' {
						return "", s.fail(`unpaired high surrogate \u%04x`, r)
					}
					s.pos += 2
					lo, err := s.hex4()
					if err != nil {
						return "", err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", s.fail(`high surrogate \u%04x not followed by a low surrogate`, r)
					}
					r = utf16.DecodeRune(r, lo)
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", s.fail("invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", s.fail("invalid UTF-8 in string")
			}
			b = append(b, s.data[s.pos:s.pos+size]...)
			s.pos += size
		}
	}
}

func (s *scanner) hex4() (rune, error) {
	if s.pos+4 > len(s.data) {
		return 0, s.fail(`truncated \u escape`)
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, s.fail(`invalid hex digit %q in \u escape`, c)
		}
		r = r<<4 | rune(d)
	}
	s.pos += 4
	return r, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans a JSON number and checks, exactly on its decimal digits (no float rounding, no
// exponent limit), that it denotes an integer with |n| <= 2^53-1. The SQL helper
// outbox._jcs_number applies the same rule.
func (s *scanner) number() error {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	intStart := s.pos
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.pos < len(s.data) && s.data[s.pos] >= '1' && s.data[s.pos] <= '9':
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
	default:
		return s.fail("invalid number")
	}
	intDigits := s.data[intStart:s.pos]
	var fracDigits []byte
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		fs := s.pos
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
		if s.pos == fs {
			return s.fail("invalid number: no digits after '.'")
		}
		fracDigits = s.data[fs:s.pos]
	}
	var exp int64
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		neg := false
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			neg = s.data[s.pos] == '-'
			s.pos++
		}
		es := s.pos
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			if exp < 1_000_000_000 { // beyond any document length: decides like the true value
				exp = exp*10 + int64(s.data[s.pos]-'0')
			}
			s.pos++
		}
		if s.pos == es {
			return s.fail("invalid number: no digits in exponent")
		}
		if exp > 1_000_000_000 {
			exp = 1_000_000_000
		}
		if neg {
			exp = -exp
		}
	}
	literal := s.data[start:s.pos]

	// Significant digits without leading zeros; value = digits * 10^(exp - len(frac)).
	digits := append(append([]byte{}, intDigits...), fracDigits...)
	digits = bytes.TrimLeft(digits, "0")
	if len(digits) == 0 {
		return nil // a zero, however written
	}
	trimmed := bytes.TrimRight(digits, "0")
	e10 := exp - int64(len(fracDigits)) + int64(len(digits)-len(trimmed))
	if e10 < 0 {
		return s.numFail(start, "number %s is not an integer", literal)
	}
	if int64(len(trimmed))+e10 > 16 {
		return s.numFail(start, "number %s is outside the safe integer range ±(2^53-1)", literal)
	}
	var v int64
	for _, c := range trimmed {
		v = v*10 + int64(c-'0')
	}
	for i := int64(0); i < e10; i++ {
		v *= 10
	}
	if v > MaxSafeInteger {
		return s.numFail(start, "number %s is outside the safe integer range ±(2^53-1)", literal)
	}
	return nil
}

func (s *scanner) numFail(start int, format string, literal []byte) error {
	if len(literal) > 64 {
		literal = append(literal[:64:64], "..."...)
	}
	s.pos = start
	return s.fail(format, literal)
}
