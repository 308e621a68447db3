package receipt

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
)

const (
	evID = "0b8f3c7e-5d0a-4c1e-9a55-6f0e2f1d9a01"
	sha  = "4e61575151e66fcadccb26c4b1311612f1576142b66196311ce9099cb21308dd"
)

func params(kind Kind) Params {
	p := Params{Destination: "dest", ConsumerName: "cons", EventID: evID, EventEnvelopeSHA256: sha,
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Fields: Fields{"consumerOutcome": "recorded"}}
	switch kind {
	case OperationsProjection:
		p.Fields = Fields{"projectionOutcome": "applied"}
		p.ProjectionName, p.ProjectionVersion = "operations_timeline", 1
		p.EventType, p.EventSchemaVersion = "run.created@2.0", "2.0"
	case BrokerPublication:
		p.Fields = BrokerFields("outbox", 42, false)
	}
	return p
}

func keys(t *testing.T, raw []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// R-AK-1, R-AK-1a: every kind builds a receipt that parses back, with its digest, the default
// ref and an ack of exactly the contract's keys.
func TestBuildEveryKind(t *testing.T) {
	for _, info := range testCat.Kinds() {
		d, err := testCat.Build(info.Kind, params(info.Kind))
		if err != nil {
			t.Fatalf("%s: %v", info.Kind, err)
		}
		if d.Ref != DefaultRef("cons", params(info.Kind).ProjectionName, params(info.Kind).ProjectionVersion, evID) {
			t.Errorf("%s: ref %s", info.Kind, d.Ref)
		}
		p, err := testCat.Parse(d.Receipt)
		if err != nil || p.Digest != d.Digest || string(p.Ack) != string(d.Ack) || string(p.Receipt) != string(d.Receipt) {
			t.Fatalf("%s: parse = %+v, %v", info.Kind, p, err)
		}
		if got := keys(t, d.Ack); got != "appliedReceipt,consumerName,destination,eventEnvelopeDigestAlgorithmVersion,eventEnvelopeSha256,eventId" {
			t.Errorf("%s: ack keys %s", info.Kind, got)
		}
		var ack struct{ AppliedReceipt json.RawMessage }
		_ = json.Unmarshal(d.Ack, &ack)
		want := []string{"kind", info.RefField(), info.SchemaVersionField(), info.AlgorithmField(), info.DigestField()}
		sort.Strings(want)
		if got := keys(t, ack.AppliedReceipt); got != strings.Join(want, ",") {
			t.Errorf("%s: appliedReceipt keys %s", info.Kind, got)
		}
		var m map[string]any
		_ = json.Unmarshal(d.Receipt, &m)
		if m[info.TimeField] != "2026-01-02T03:04:05.000006Z" {
			t.Errorf("%s: time %v", info.Kind, m[info.TimeField])
		}
	}
}

// R-AK-1a: the digest covers everything but the ref, the digest and the time.
func TestDigestCandidate(t *testing.T) {
	a, _ := testCat.Build(MeteringInputProcessor, params(MeteringInputProcessor))
	p := params(MeteringInputProcessor)
	p.Ref, p.Time = "another-ref", p.Time.Add(time.Hour)
	b, _ := testCat.Build(MeteringInputProcessor, p)
	if a.Digest != b.Digest {
		t.Fatal("ref or time changed the digest")
	}
	p.Fields = Fields{"consumerOutcome": "other"}
	c, _ := testCat.Build(MeteringInputProcessor, p)
	if c.Digest == a.Digest {
		t.Fatal("a kind field did not change the digest")
	}
	// Tampering after the fact is caught.
	var m map[string]any
	_ = json.Unmarshal(a.Receipt, &m)
	m["consumerOutcome"] = "tampered"
	raw, _ := json.Marshal(m)
	if _, _, err := testCat.VerifyDigest(raw); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered receipt: %v, want ErrDigestMismatch", err)
	}
	if err := testCat.CheckAck(b.Ack, a.Receipt); !errors.Is(err, ErrAckMismatch) {
		t.Fatalf("ack of another receipt: %v, want ErrAckMismatch", err)
	}
	if err := testCat.CheckAck(a.Ack, a.Receipt); err != nil {
		t.Fatal(err)
	}
}

func TestBuildRejects(t *testing.T) {
	cases := map[string]func(*Params) Kind{
		"reserved field": func(p *Params) Kind { p.Fields = Fields{"eventId": "x"}; return MeteringInputProcessor },
		"prefixed field": func(p *Params) Kind {
			p.Fields = Fields{"meteringInputProcessorConsumerReceiptRef": "x"}
			return MeteringInputProcessor
		},
		"float":                    func(p *Params) Kind { p.Fields = Fields{"amount": 1.5}; return MeteringInputProcessor },
		"unregistered member":      func(p *Params) Kind { p.Fields = Fields{"outcome": "x"}; return MeteringInputProcessor },
		"member of the wrong type": func(p *Params) Kind { p.Fields = Fields{"consumerOutcome": 1}; return MeteringInputProcessor },
		"member of another kind":   func(p *Params) Kind { p.Fields = Fields{"projectionOutcome": "x"}; return MeteringInputProcessor },
		"broker with a projection": func(p *Params) Kind {
			p.Fields = BrokerFields("outbox", 1, false)
			p.ProjectionName, p.ProjectionVersion = "x", 1
			return BrokerPublication
		},
		"ops without projection":     func(p *Params) Kind { return OperationsProjection },
		"broker without stream":      func(p *Params) Kind { return BrokerPublication },
		"bad event id":               func(p *Params) Kind { p.EventID = "x"; return MeteringInputProcessor },
		"bad digest":                 func(p *Params) Kind { p.EventEnvelopeSHA256 = "ABC"; return MeteringInputProcessor },
		"projection without version": func(p *Params) Kind { p.ProjectionName = "x"; return MeteringInputProcessor },
		"unknown kind":               func(p *Params) Kind { return "nope" },
	}
	for name, f := range cases {
		p := params(MeteringInputProcessor)
		if _, err := testCat.Build(f(&p), p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := testCat.Parse([]byte(`{"meteringInputProcessorConsumerReceiptRef":"a","brokerPublicationReceiptRef":"b"}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("two kinds: %v", err)
	}
}

// R-AK-1a, D-2: DigestCandidate is the canonical text of the receipt minus its ref, digest and
// time; its SHA-256 is the digest; Build returns the same bytes; a non-canonical receipt text
// gives the same candidate; a document without a kind is refused.
func TestDigestCandidateText(t *testing.T) {
	for _, info := range testCat.Kinds() {
		d, err := testCat.Build(info.Kind, params(info.Kind))
		if err != nil {
			t.Fatal(err)
		}
		k, cand, err := testCat.DigestCandidate(d.Receipt)
		if err != nil || k != info.Kind {
			t.Fatalf("%s: %s, %v", info.Kind, k, err)
		}
		if string(cand) != string(d.Candidate) {
			t.Fatalf("%s: DigestCandidate %s, Build %s", info.Kind, cand, d.Candidate)
		}
		if canon.SumHex(cand) != d.Digest {
			t.Fatalf("%s: sha256(candidate) != digest", info.Kind)
		}
		var m map[string]any
		_ = json.Unmarshal(d.Receipt, &m)
		for _, f := range []string{info.RefField(), info.DigestField(), info.TimeField} {
			delete(m, f)
		}
		want, _ := json.Marshal(m)
		if c, _ := canon.Canonicalize(want); string(c) != string(cand) {
			t.Fatalf("%s: candidate %s, want %s", info.Kind, cand, c)
		}
		pretty, _ := json.MarshalIndent(json.RawMessage(d.Receipt), "", "  ")
		if _, again, err := testCat.DigestCandidate(pretty); err != nil || string(again) != string(cand) {
			t.Fatalf("%s: pretty receipt: %s, %v", info.Kind, again, err)
		}
	}
	if _, _, err := testCat.DigestCandidate([]byte(`{"a":1}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no kind: %v", err)
	}
	if _, _, err := testCat.DigestCandidate([]byte(`{"a":1.5}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("float: %v", err)
	}
}

// R-AK-1a: the members table lists every kind, sorted, with JSON types the database knows.
func TestMembersSorted(t *testing.T) {
	for _, info := range testCat.Kinds() {
		ms := testCat.Members(info.Kind)
		if len(ms) == 0 {
			t.Fatalf("%s: no members", info.Kind)
		}
		for i, m := range ms {
			if i > 0 && ms[i-1].Name >= m.Name {
				t.Errorf("%s: members not sorted at %s", info.Kind, m.Name)
			}
			if m.JSONType != TypeString && m.JSONType != TypeInteger && m.JSONType != TypeBoolean {
				t.Errorf("%s: %s has type %s", info.Kind, m.Name, m.JSONType)
			}
		}
	}
}
