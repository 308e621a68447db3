// Package testfix holds fixtures shared by the integration tests: the reference release,
// registration and activation, and valid sample envelopes for each reference event type.
package testfix

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
)

// ReferenceRelease returns the OceanWay first release (SPEC §3.4) with its digest computed.
func ReferenceRelease(t testing.TB) json.RawMessage {
	t.Helper()
	doc, err := reference.LoadRelease()
	if err != nil {
		t.Fatalf("load reference release: %v", err)
	}
	return doc
}

// ActivateReference registers and activates the reference release as a superuser connection
// switched to outbox_registrar for the two calls, and returns its quartet.
func ActivateReference(t testing.TB, db pgcall.DBTX) pgcall.Quartet {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatalf("set role: %v", err)
	}
	defer func() { _, _ = db.Exec(ctx, "RESET ROLE") }()
	q, err := pgcall.RegisterDeliverySet(ctx, db, ReferenceRelease(t), "oceanway-first-release")
	if err != nil {
		t.Fatalf("register reference release: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, db, q); err != nil {
		t.Fatalf("activate reference release: %v", err)
	}
	return q
}

var seq atomic.Int64

// Envelope returns a valid EventEnvelope@1 (as a Go map) for a reference event type, with the
// refinements of R-AP-7 satisfied, a fresh eventId and occurredAt. Callers may edit the map.
func Envelope(eventType, schemaVersion, aggregateID string, revision int64) map[string]any {
	n := seq.Add(1)
	env := map[string]any{
		"eventId":            NewUUID(),
		"eventType":          eventType,
		"eventSchemaVersion": schemaVersion,
		"aggregateId":        aggregateID,
		"aggregateRevision":  revision,
		"tenant": map[string]any{
			"tenantKind":  "organization",
			"tenantId":    "tenant-1",
			"workspaceId": "workspace-1",
		},
		"correlationId": fmt.Sprintf("corr-%d", n),
		"operationId":   fmt.Sprintf("op-%d", n),
		"causationId":   fmt.Sprintf("cause-%d", n),
		"occurredAt":    time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"payload":       map[string]any{"seq": n, "note": "sample"},
	}
	return env
}

// Append appends env through outbox.append_event (database-side canonicalization) as
// outbox_producer and returns the event id.
func Append(t testing.TB, db pgcall.DBTX, env map[string]any) string {
	t.Helper()
	ctx := context.Background()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "SET ROLE outbox_producer"); err != nil {
		t.Fatalf("set role: %v", err)
	}
	defer func() { _, _ = db.Exec(ctx, "RESET ROLE") }()
	r, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: b})
	if err != nil {
		t.Fatalf("append %v: %v", env["eventType"], err)
	}
	return r.EventID
}

// AppendHot appends env on the D-2 hot path (Go canonicalization + digest).
func AppendHot(t testing.TB, db pgcall.DBTX, env map[string]any) string {
	t.Helper()
	ctx := context.Background()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	c, d, err := canon.CanonicalizeDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	s := string(c)
	if _, err := db.Exec(ctx, "SET ROLE outbox_producer"); err != nil {
		t.Fatalf("set role: %v", err)
	}
	defer func() { _, _ = db.Exec(ctx, "RESET ROLE") }()
	r, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: b, CanonicalText: &s, EnvelopeSHA256: &d})
	if err != nil {
		t.Fatalf("append (hot) %v: %v", env["eventType"], err)
	}
	return r.EventID
}

// NewUUID returns a random (version 4) UUID in canonical lower-case form.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// RegisterRetargetedReference registers (as a superuser connection switched to
// outbox_registrar) delivery-set version setVersion: the reference release with every member of
// projection routed to projectionVersion. It is not activated: only cutover_projection moves the
// pointer to it (SPEC R-PV-2, OB808).
func RegisterRetargetedReference(t testing.TB, db pgcall.DBTX, setVersion int, projection string, projectionVersion int) pgcall.Quartet {
	t.Helper()
	ctx := context.Background()
	var m map[string]any
	if err := json.Unmarshal(ReferenceRelease(t), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "deliverySetDefinitionDigest")
	m["deliverySetVersion"] = setVersion
	for _, x := range m["members"].([]any) {
		if pt, ok := x.(map[string]any)["projectionTarget"].(map[string]any); ok && pt["projectionName"] == projection {
			pt["projectionVersion"] = projectionVersion
		}
	}
	d, err := canon.Digest(m)
	if err != nil {
		t.Fatal(err)
	}
	m["deliverySetDefinitionDigest"] = d
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "SET ROLE outbox_registrar"); err != nil {
		t.Fatalf("set role: %v", err)
	}
	defer func() { _, _ = db.Exec(ctx, "RESET ROLE") }()
	q, err := pgcall.RegisterDeliverySet(ctx, db, doc, fmt.Sprintf("retargeted-%s-%d", projection, projectionVersion))
	if err != nil {
		t.Fatalf("register retargeted release: %v", err)
	}
	return q
}
