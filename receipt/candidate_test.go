package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// D-2 receipt hot path: the candidate text is canonical, hashes to the receipt's digest and is
// the receipt minus <prefix>Ref, <prefix>Digest and the time field, for every kind.
func TestDigestCandidateHotPath(t *testing.T) {
	t.Parallel()
	for _, info := range testCat.Kinds() {
		d, err := testCat.Build(info.Kind, params(info.Kind))
		if err != nil {
			t.Fatalf("%s: %v", info.Kind, err)
		}
		// Any member order and whitespace: the candidate does not depend on the input form.
		var m map[string]any
		if err := json.Unmarshal(d.Receipt, &m); err != nil {
			t.Fatal(err)
		}
		loose, _ := json.MarshalIndent(m, "", "  ")
		k, cand, err := testCat.DigestCandidate(loose)
		if err != nil || k != info.Kind {
			t.Fatalf("%s: kind %s, %v", info.Kind, k, err)
		}
		sum := sha256.Sum256(cand)
		if hex.EncodeToString(sum[:]) != d.Digest {
			t.Errorf("%s: sha256(candidate) is not the receipt digest", info.Kind)
		}
		if c, err := canon.Canonicalize(cand); err != nil || !bytes.Equal(c, cand) {
			t.Errorf("%s: candidate is not canonical: %s", info.Kind, cand)
		}
		var cm map[string]json.RawMessage
		_ = json.Unmarshal(cand, &cm)
		for _, gone := range []string{info.RefField(), info.DigestField(), info.TimeField} {
			if _, ok := cm[gone]; ok {
				t.Errorf("%s: candidate still has %s", info.Kind, gone)
			}
		}
		if len(cm) != len(m)-3 {
			t.Errorf("%s: candidate has %d members, receipt %d", info.Kind, len(cm), len(m))
		}
	}
	// JCS escaping and UTF-16 order survive (json.Marshal alone would escape "<" and order by UTF-8).
	r := []byte(`{"meteringInputProcessorConsumerReceiptRef":"r","meteringInputProcessorConsumerReceiptDigest":"x",
		"committedAt":"t","note":"<a&b>","\ud83d\ude00":1,"\uff61":2}`)
	_, cand, err := testCat.DigestCandidate(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"note":"<a&b>","😀":1,"｡":2}`; string(cand) != want {
		t.Errorf("candidate %s, want %s", cand, want)
	}
	for _, bad := range []string{`[1]`, `{"a":1.5}`, `{"a":1}`, `not json`, `null`} {
		if _, _, err := testCat.DigestCandidate([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// The member scan over canonical text agrees with the map-based candidate of Parse
// (candidate) on documents with nested containers, escapes and brackets inside strings.
func TestDigestCandidateAgreesWithParse(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{"committedAt":"t","meteringInputProcessorConsumerReceiptRef":"r\"}]","a":{"b":[1,{"c":"]}\\"},[]],"d":{}},"e":"\u001f\n","f\"g":true,"h":null,"i":-0,"meteringInputProcessorConsumerReceiptDigest":"d"}`,
		`{"brokerPublicationReceiptDigest":"x","publishedAt":"p","z":[[[]]],"brokerPublicationReceiptRef":"{"}`,
		`{"operationsProjectionAppliedReceiptRef":"only"}`,
	}
	for _, doc := range docs {
		_, cand, err := testCat.DigestCandidate([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		c, _ := canon.Canonicalize([]byte(doc))
		var m map[string]json.RawMessage
		if err := json.Unmarshal(c, &m); err != nil {
			t.Fatal(err)
		}
		r, err := testCat.kindOf(m)
		if err != nil {
			t.Fatal(err)
		}
		wantCand, err := candidate(m, r.Info)
		if err != nil {
			t.Fatal(err)
		}
		want := canon.SumHex(wantCand)
		sum := sha256.Sum256(cand)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: candidate %s hashes to %s, Parse's candidate to %s", doc, cand, got, want)
		}
	}
}
