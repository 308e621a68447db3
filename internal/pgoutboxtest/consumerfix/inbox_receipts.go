package consumerfix

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
)

// Metering is the consumer name of the metering input processor, the inbox tests' consumer.
const Metering = "metering_input_processor_consumer"

// EnvelopeAndReceipt returns a canonical envelope, its digest and a complete receipt of the
// metering consumer for it (no projection).
func EnvelopeAndReceipt(t *testing.T, fields receipt.Fields) (json.RawMessage, string, receipt.Document) {
	t.Helper()
	env := testfix.Envelope("execution.attempt-eligibility.finalized@1", "1", "attempt-"+testfix.NewUUID(), 1)
	raw, _ := json.Marshal(env)
	c, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	sha, _ := canon.SHA256Hex(c)
	doc, err := testdb.Receipts(t).Build(reference.MeteringInputProcessorKind, receipt.Params{
		Destination: "metering_input_processor", ConsumerName: Metering, EventID: env["eventId"].(string),
		EventEnvelopeSHA256: sha, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	return c, sha, doc
}

// Record records a receipt through inbox.record_receipt (pgcall.RecordReceipt).
func Record(ctx context.Context, db pgcall.DBTX, consumerName, projName string, projVersion int, env, rcpt json.RawMessage) (pgcall.RecordReceiptResult, error) {
	return pgcall.RecordReceipt(ctx, db, pgcall.RecordReceiptParams{ConsumerName: consumerName, ProjectionName: projName,
		ProjectionVersion: projVersion, EventEnvelope: env, Receipt: rcpt})
}
