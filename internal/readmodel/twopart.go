package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// TwoPartProof is a completeness proof where the projector's inbox is another database
// (R-OP-2): the producer's part is the stored CompletenessProofManifest@1 (its sha256 binds
// it), the inbox part is computed from one REPEATABLE READ snapshot of the inbox database taken
// after the producer's: the receipt anti-join (acknowledged projection deliveries of the members
// whose receipt the inbox does not hold with the same envelope digest - e.g. lost in a restore)
// and the inbox's open revision gaps. Document is RFC 8785 canonical; SHA256 its digest.
// Status: complete_for_supported_scope iff the producer's part is complete and both inbox
// guards are 0; unknown when the producer's part is unknown; else partial_source_gap.
type TwoPartProof struct {
	Producer pgcall.CompletenessSnapshot
	Document json.RawMessage
	SHA256   string
	Status   string
}

type guard struct {
	Count     int    `json:"count"`
	Evaluated bool   `json:"evaluated"`
	SetSHA256 string `json:"setSha256"`
}

func newGuard(entries []string) (guard, error) {
	sort.Strings(entries)
	if entries == nil {
		entries = []string{}
	}
	d, err := canon.Digest(entries)
	return guard{Count: len(entries), Evaluated: true, SetSHA256: d}, err
}

// producerEvidence reads, inside the caller's REPEATABLE READ transaction of the producer
// database, the stored manifest and the acknowledged projection deliveries the inbox part is
// checked against.
func producerEvidence(ctx context.Context, ptx pgx.Tx, manifestID string) (json.RawMessage, []pgcall.ProjectionAck, error) {
	doc, err := pgcall.ReadManifest(ctx, ptx, manifestID)
	if err != nil {
		return nil, nil, err
	}
	acks, err := pgcall.ProjectionAcks(ctx, ptx)
	return doc, acks, err
}

// TakeTwoPart takes the producer's proof of scope (stored by take_completeness_snapshot), then
// snapshots the projector's inbox database, and records the two-part document in the producer
// database (outbox.record_two_part_proof); both connections run as outbox_auditor.
func TakeTwoPart(ctx context.Context, producer, inbox *pgx.Conn, scope json.RawMessage) (TwoPartProof, error) {
	ptx, err := producer.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return TwoPartProof{}, err
	}
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	s, err := pgcall.TakeCompletenessSnapshot(ctx, ptx, scope)
	if err != nil {
		return TwoPartProof{}, err
	}
	doc, acks, err := producerEvidence(ctx, ptx, s.ManifestID)
	if err != nil {
		return TwoPartProof{}, err
	}
	if err := ptx.Commit(ctx); err != nil {
		return TwoPartProof{}, err
	}
	p, err := inboxPart(ctx, inbox, s, doc, acks)
	if err != nil {
		return TwoPartProof{}, err
	}
	// kept beside the producer's manifest, immutable and content-addressed: the database checks
	// the binding and that the status follows from the guards (outbox.record_two_part_proof)
	sha, err := pgcall.RecordTwoPartProof(ctx, producer, p.Document)
	if err != nil {
		return TwoPartProof{}, err
	}
	if sha != p.SHA256 {
		return TwoPartProof{}, fmt.Errorf("two-part proof: the database digests it as %s, Go as %s", sha, p.SHA256)
	}
	return p, nil
}

// CheckTwoPart re-checks a two-part proof: it must be the one recorded in the producer database
// (else unverified, no_completed_snapshot); the producer's part with check_completeness; when
// that is verified_current, the inbox part is rebuilt from a new inbox snapshot and compared by
// digest. Returns freshness and reason as check_completeness does.
func CheckTwoPart(ctx context.Context, producer, inbox *pgx.Conn, p TwoPartProof) (string, string, error) {
	stored, found, err := pgcall.ReadTwoPartProof(ctx, producer, p.SHA256)
	if err != nil {
		return "", "", err
	}
	if !found || !bytes.Equal(stored.Document, p.Document) {
		return "unverified", "no_completed_snapshot", nil
	}
	f, err := pgcall.CheckCompleteness(ctx, producer, p.Producer.ManifestID)
	if err != nil {
		return "", "", err
	}
	if f.Freshness != "verified_current" {
		return f.Freshness, *f.Reason, nil
	}
	ptx, err := producer.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return "", "", err
	}
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	doc, acks, err := producerEvidence(ctx, ptx, p.Producer.ManifestID)
	if err != nil {
		return "", "", err
	}
	if err := ptx.Commit(ctx); err != nil {
		return "", "", err
	}
	now, err := inboxPart(ctx, inbox, p.Producer, doc, acks)
	if err != nil {
		return "", "", err
	}
	if now.SHA256 != p.SHA256 {
		return "stale", "source_changed", nil
	}
	return "verified_current", "", nil
}

func inboxPart(ctx context.Context, inbox *pgx.Conn, s pgcall.CompletenessSnapshot, doc json.RawMessage, acks []pgcall.ProjectionAck) (TwoPartProof, error) {
	var m struct {
		Members []struct {
			EventID string `json:"eventId"`
		} `json:"members"`
		SourceFilter struct {
			Destinations []string `json:"destinations"`
		} `json:"sourceFilter"`
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		return TwoPartProof{}, fmt.Errorf("producer manifest: %w", err)
	}
	member := make(map[string]bool, len(m.Members))
	for _, x := range m.Members {
		member[x.EventID] = true
	}
	inScopeDest := func(d string) bool {
		if m.SourceFilter.Destinations == nil {
			return true
		}
		for _, x := range m.SourceFilter.Destinations {
			if x == d {
				return true
			}
		}
		return false
	}
	itx, err := inbox.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return TwoPartProof{}, err
	}
	defer func() { _ = itx.Rollback(context.WithoutCancel(ctx)) }()
	receipts, gaps, err := pgcall.InboxProjectionEvidence(ctx, itx)
	if err != nil {
		return TwoPartProof{}, err
	}
	if err := itx.Commit(ctx); err != nil {
		return TwoPartProof{}, err
	}
	held := make(map[pgcall.InboxReceiptKey]bool, len(receipts))
	for _, r := range receipts {
		held[r] = true
	}
	var missing, matched []string
	for _, a := range acks {
		if !member[a.EventID] || !inScopeDest(a.Destination) {
			continue
		}
		k := pgcall.InboxReceiptKey{ConsumerName: a.ConsumerName, ProjectionName: a.ProjectionName,
			ProjectionVersion: a.ProjectionVersion, EventID: a.EventID, EventEnvelopeSHA256: a.EventEnvelopeSHA256}
		if held[k] {
			matched = append(matched, a.EventID+"/"+a.EventEnvelopeSHA256)
		} else {
			missing = append(missing, a.EventID+"/"+a.Destination)
		}
	}
	anti, err := newGuard(missing)
	if err != nil {
		return TwoPartProof{}, err
	}
	gapsG, err := newGuard(gaps)
	if err != nil {
		return TwoPartProof{}, err
	}
	rs, err := newGuard(matched)
	if err != nil {
		return TwoPartProof{}, err
	}
	status := "partial_source_gap"
	switch {
	case s.Status == "unknown":
		status = "unknown"
	case s.Status == "complete_for_supported_scope" && anti.Count == 0 && gapsG.Count == 0:
		status = "complete_for_supported_scope"
	}
	d := map[string]any{
		"proofType":              "CompletenessProofTwoPart",
		"digestAlgorithmVersion": canon.Algorithm,
		"parts": []any{
			map[string]any{"part": "producer", "receiptEvidence": "acknowledged_deliveries",
				"manifestSha256": s.ManifestSHA256, "status": s.Status},
			map[string]any{"part": "projector_inbox", "receiptEvidence": "inbox_receipts",
				"receiptAntiJoin": anti, "openRevisionGaps": gapsG, "matchedReceipts": rs},
		},
		"status": status,
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return TwoPartProof{}, err
	}
	c, sha, err := canon.CanonicalizeDigest(raw)
	if err != nil {
		return TwoPartProof{}, err
	}
	return TwoPartProof{Producer: s, Document: c, SHA256: sha, Status: status}, nil
}
