package projectionfix

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// RegisterSet2 registers delivery-set version 2: the reference release with every
// operations_timeline member targeting projectionVersion 2 (registered, not active).
func RegisterSet2(t *testing.T, reg pgcall.DBTX) pgcall.Quartet {
	t.Helper()
	doc := kernelfix.MutateRelease(t, func(m map[string]any) {
		m["deliverySetVersion"] = 2
		for _, x := range kernelfix.Members(m) {
			pt := x.(map[string]any)["projectionTarget"].(map[string]any)
			if pt["projectionName"] == "operations_timeline" {
				pt["projectionVersion"] = 2
			}
		}
	})
	q, err := pgcall.RegisterDeliverySet(context.Background(), reg, doc, "v2-operations-timeline-2")
	testfix.Must(t, err)
	return q
}

// Receipt records the operations_projector receipt of event id under operations_timeline@version
// (token: the build token of a shadow, "" for an active or frozen version).
func Receipt(t *testing.T, f Fixture, version int, token, id string) error {
	t.Helper()
	ctx := context.Background()
	var raw string
	testfix.Must(t, f.Admin.QueryRow(ctx, `SELECT envelope::text FROM outbox.event_source WHERE event_id = $1::uuid`, id).Scan(&raw))
	c, err := canon.Canonicalize(json.RawMessage(raw))
	testfix.Must(t, err)
	sha, err := canon.SHA256Hex(c)
	testfix.Must(t, err)
	var env map[string]any
	testfix.Must(t, json.Unmarshal(c, &env))
	doc, err := testdb.Receipts(t).Build(reference.OperationsProjectionKind, receipt.Params{Destination: kernelfix.DestCoreOps,
		ConsumerName: "operations_projector", EventID: id, EventEnvelopeSHA256: sha,
		ProjectionName: "operations_timeline", ProjectionVersion: version,
		EventType: env["eventType"].(string), EventSchemaVersion: env["eventSchemaVersion"].(string)})
	testfix.Must(t, err)
	_, err = pgcall.RecordReceipt(ctx, f.Cons, pgcall.RecordReceiptParams{ConsumerName: "operations_projector",
		ProjectionName: "operations_timeline", ProjectionVersion: version, EventEnvelope: c, Receipt: doc.Receipt,
		BuildToken: token})
	return err
}

// Drain claims every source of a build until it is done: an empty batch (building, or frozen
// with its boundary handed out). Returns the number of sources handed out.
func Drain(t *testing.T, f Fixture, build, token string) int {
	t.Helper()
	n := 0
	for i := 0; i < 100; i++ {
		batch, err := pgcall.ClaimRebuildSources(context.Background(), f.Proj, build, token, 2)
		testfix.Must(t, err)
		if len(batch) == 0 {
			return n
		}
		n += len(batch)
	}
	t.Fatal("the claims do not end")
	return n
}
