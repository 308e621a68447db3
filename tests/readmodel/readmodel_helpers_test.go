package readmodel

// Shared helpers of the operations read-model tests (SPEC §11 R-OP-1..4). Prefixed rm.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// updateGoldens rewrites the read-model contract golden (contracts/golden) and the console and
// status-page screenshots (docs/*.png); tests/kernel declares the same flag for its goldens.
var updateGoldens = flag.Bool("update-goldens", false, "rewrite the read-model golden in contracts/golden and the console and status-page screenshots in docs/")

var rmAllDests = []string{kernelfix.DestMetering, kernelfix.DestCoord, kernelfix.DestCatchUp, kernelfix.DestCoreOps}

type rmBundle struct {
	kernelfix.Bundle
	aud *pgx.Conn // SET ROLE outbox_auditor: every read-model call
}

func rmSetup(t *testing.T) rmBundle {
	t.Helper()
	b := kernelfix.Setup(t)
	return rmBundle{Bundle: b, aud: testdb.Conn(t, b.Dsn, "outbox_auditor")}
}

// rmTake takes a completeness snapshot of scope in its own REPEATABLE READ transaction.
func rmTake(t *testing.T, db *pgx.Conn, scope string) pgcall.CompletenessSnapshot {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	s, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(scope))
	if err != nil {
		t.Fatalf("take snapshot %s: %v", scope, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// rmCheck is "freshness" or "freshness/reason".
func rmCheck(t *testing.T, db *pgx.Conn, id string) string {
	t.Helper()
	f, err := pgcall.CheckCompleteness(context.Background(), db, id)
	if err != nil {
		t.Fatalf("check %s: %v", id, err)
	}
	if f.Reason != nil {
		return f.Freshness + "/" + *f.Reason
	}
	return f.Freshness
}

type rmGuard struct {
	Count     *int64  `json:"count"`
	Evaluated bool    `json:"evaluated"`
	SetSHA256 *string `json:"setSha256"`
}

type rmMember struct {
	DeliverySet struct {
		DefinitionDigest        string `json:"definitionDigest"`
		DefinitionSchemaVersion int    `json:"definitionSchemaVersion"`
		DigestAlgorithmVersion  string `json:"digestAlgorithmVersion"`
		Version                 int    `json:"version"`
	} `json:"deliverySet"`
	EventEnvelopeSHA256 string `json:"eventEnvelopeSha256"`
	EventID             string `json:"eventId"`
	EventType           string `json:"eventType"`
	SchemaVersion       string `json:"schemaVersion"`
}

type rmManifest struct {
	Raw             json.RawMessage
	Status          string             `json:"status"`
	MemberCount     int                `json:"memberCount"`
	MemberSetSHA256 string             `json:"memberSetSha256"`
	Members         []rmMember         `json:"members"`
	Guards          map[string]rmGuard `json:"guards"`
	KindSets        []struct {
		Count     int    `json:"count"`
		EventType string `json:"eventType"`
		SetSHA256 string `json:"setSha256"`
	} `json:"kindSets"`
	SourceFilter       json.RawMessage `json:"sourceFilter"`
	SourceFilterSHA256 string          `json:"sourceFilterSha256"`
}

// rmRead reads a manifest and checks that the stored text is RFC 8785 canonical (Go's JCS
// gives the same bytes) and that its sha256 is the manifest_sha256 (content addressing).
func rmRead(t *testing.T, db *pgx.Conn, s pgcall.CompletenessSnapshot) rmManifest {
	t.Helper()
	raw, err := pgcall.ReadManifest(context.Background(), db, s.ManifestID)
	if err != nil || raw == nil {
		t.Fatalf("read manifest %s: %v (nil=%v)", s.ManifestID, err, raw == nil)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(c) != string(raw) {
		t.Fatalf("manifest text is not RFC 8785 canonical:\n%s\n%s", raw, c)
	}
	if got := rmSHA(c); got != s.ManifestSHA256 {
		t.Fatalf("manifest sha256 %s, stored %s", got, s.ManifestSHA256)
	}
	var m rmManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m.Raw = raw
	if m.Status != s.Status {
		t.Fatalf("document status %s, row status %s", m.Status, s.Status)
	}
	// The set digests are recomputable by an outsider from the member list alone.
	members, _ := json.Marshal(m.Members)
	mc, _ := jcs.Transform(members)
	if len(m.Members) == 0 {
		mc = []byte("[]")
	}
	if rmSHA(mc) != m.MemberSetSHA256 || len(m.Members) != m.MemberCount {
		t.Fatalf("memberSetSha256 / memberCount do not match the member list")
	}
	return m
}

func rmSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// rmAllZero: every guard evaluated and 0.
func rmAllZero(m rmManifest) bool {
	for _, g := range m.Guards {
		if !g.Evaluated || g.Count == nil || *g.Count != 0 {
			return false
		}
	}
	return len(m.Guards) == 6
}

func rmGuardCount(t *testing.T, m rmManifest, name string) int64 {
	t.Helper()
	g, ok := m.Guards[name]
	if !ok || g.Count == nil {
		t.Fatalf("guard %s missing or not evaluated: %s", name, m.Raw)
	}
	return *g.Count
}

// rmDrain claims and acknowledges every due delivery of the given destinations.
func rmDrain(t *testing.T, b rmBundle, dests ...string) int {
	t.Helper()
	if len(dests) == 0 {
		dests = rmAllDests
	}
	n := 0
	for {
		cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 100, kernelfix.LongLease, dests...)
		if len(cs) == 0 {
			return n
		}
		for _, c := range cs {
			kernelfix.Ack(t, b.Disp, c)
			n++
		}
	}
}
