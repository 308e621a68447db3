package receipt

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// The direct writer of receipt strings agrees byte for byte with the canonicalizer (RFC 8785)
// on every ASCII byte, on characters that json.Marshal escapes (HTML, U+2028/2029), on
// multi-byte UTF-8 and on random strings; invalid UTF-8 is left to the general path.
func TestCanonicalStringMatchesJCS(t *testing.T) {
	t.Parallel()
	cases := []string{"", "plain", `q"uote`, `back\slash`, "<>&", "\u2028\u2029", "é€😀", "\x7f", "a/b"}
	for b := 1; b < 0x80; b++ {
		cases = append(cases, string(rune(b)), "x"+string(rune(b))+"y")
	}
	rng := rand.New(rand.NewSource(36))
	alphabet := []rune("ab\"\\\n\t\x01\x1f<>&é€😀\u2028 /")
	for i := 0; i < 2000; i++ {
		var sb strings.Builder
		for n := rng.Intn(12); n > 0; n-- {
			sb.WriteRune(alphabet[rng.Intn(len(alphabet))])
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		got, ok := appendCanonicalString(nil, s)
		if !ok {
			t.Fatalf("%q: refused", s)
		}
		m, _ := json.Marshal(s)
		want, err := canon.Canonicalize(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%q: direct %s, canonicalizer %s", s, got, want)
		}
	}
	for _, s := range []string{"\xff", "a\x00"} {
		if _, ok := appendCanonicalString(nil, s); ok {
			t.Fatalf("%q must take the general path", s)
		}
	}
}

// Build's direct canonical writing produces what the general path produces: the receipt is
// canonical text, the candidate is the map-based candidate (candidate), the digest its sha256,
// and the ack is ackOf's — for every kind, for tricky member strings and for integers at the
// limits; values outside the fast path's shape (unsafe integers) are refused as before.
func TestFastBuildMatchesGeneral(t *testing.T) {
	t.Parallel()
	outcomes := []string{"recorded", "", `q"uote\`, "<tag>&", "é€😀\u2028", "\x01\x1f\x7f", strings.Repeat("z", 300)}
	for _, info := range testCat.Kinds() {
		for _, o := range outcomes {
			p := params(info.Kind)
			switch info.Kind {
			case BrokerPublication:
				p.Fields = BrokerFields(o, uint64(canon.MaxSafeInteger), true)
			case OperationsProjection:
				p.Fields = Fields{"projectionOutcome": o}
			default:
				p.Fields = Fields{"consumerOutcome": o}
			}
			d, err := testCat.Build(info.Kind, p)
			if err != nil {
				t.Fatalf("%s %q: %v", info.Kind, o, err)
			}
			if c, err := canon.Canonicalize(d.Receipt); err != nil || string(c) != string(d.Receipt) {
				t.Fatalf("%s %q: receipt not canonical: %s", info.Kind, o, d.Receipt)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(d.Receipt, &m); err != nil {
				t.Fatal(err)
			}
			cand, err := candidate(m, info)
			if err != nil || string(cand) != string(d.Candidate) || canon.SumHex(cand) != d.Digest {
				t.Fatalf("%s %q: candidate %s (digest %s), general path %s (%v)", info.Kind, o, d.Candidate, d.Digest, cand, err)
			}
			ack, err := ackOf(m, info)
			if err != nil || string(ack) != string(d.Ack) {
				t.Fatalf("%s %q: ack %s, general path %s (%v)", info.Kind, o, d.Ack, ack, err)
			}
			var s string
			if info.Kind != BrokerPublication {
				_ = json.Unmarshal(m[map[bool]string{true: "projectionOutcome", false: "consumerOutcome"}[info.Kind == OperationsProjection]], &s)
				if s != o {
					t.Fatalf("%s: outcome %q, want %q", info.Kind, s, o)
				}
			}
			pd, err := testCat.Parse(d.Receipt)
			if err != nil || string(pd.Ack) != string(d.Ack) || string(pd.Candidate) != string(d.Candidate) || pd.Digest != d.Digest {
				t.Fatalf("%s %q: Parse disagrees: %+v %v", info.Kind, o, pd, err)
			}
		}
	}
	p := params(BrokerPublication)
	p.Fields = BrokerFields("s", uint64(canon.MaxSafeInteger)+1, false)
	if _, err := testCat.Build(BrokerPublication, p); err == nil {
		t.Fatal("an integer beyond 2^53-1 must be refused")
	}
	p = params(MeteringInputProcessor)
	p.Fields = Fields{"consumerOutcome": "a\x00"}
	if _, err := testCat.Build(MeteringInputProcessor, p); err == nil {
		t.Fatal("U+0000 must be refused (jcs-sha256-v1 subset)")
	}
}
