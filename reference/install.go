package reference

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
)

// The reference release on a migrated database (SPEC D-1): the kernel's migrations seed no
// destination, no domain receipt kind, no envelope refinement, no projection version, no
// observation schema and no business table; `make migrate-reference` (Install) registers the
// reference's through the kernel's public registration functions as outbox_registrar and
// creates the reference schemas as the connecting user. Every step is insert-or-compare or
// IF NOT EXISTS, so a second run is a no-op.

//go:embed mailbox_effect.sql
var mailboxEffectDDL string

// MailboxEffectSchema holds the reference mailbox handler's effect (mailbox_effect.sql):
// refmailbox.ref_effects, refmailbox.ref_key_sequences and refmailbox.apply_reference_effect.
const MailboxEffectSchema = "refmailbox"

// ReceiptKinds are the reference release's receipt kinds (SPEC §3.4, R-AK-1a), exactly as the
// kernel's migrations 004, 009 and 039 seeded them before 041.
func ReceiptKinds() []pgcall.ReceiptKindParams {
	consumerMembers := func() map[string]pgcall.ReceiptMember {
		return map[string]pgcall.ReceiptMember{
			"consumerOutcome":    {Type: "string"},
			"projectionName":     {Type: "string"},
			"projectionVersion":  {Type: "integer"},
			"eventType":          {Type: "string"},
			"eventSchemaVersion": {Type: "string"},
		}
	}
	return []pgcall.ReceiptKindParams{
		{
			ReceiptKind: "operations_projection", ReceiptType: "OperationsProjectionAppliedReceipt",
			FieldPrefix: "operationsProjectionAppliedReceipt", TimeField: "appliedAt", ReceiptSchemaVersion: 1,
			Members: map[string]pgcall.ReceiptMember{
				"projectionName":     {Type: "string", Required: true},
				"projectionVersion":  {Type: "integer", Required: true},
				"eventType":          {Type: "string", Required: true},
				"eventSchemaVersion": {Type: "string", Required: true},
				"projectionOutcome":  {Type: "string"},
			},
			RequiresProjection: true,
		},
		{
			ReceiptKind: "metering_input_processor", ReceiptType: "MeteringInputProcessorConsumerReceipt",
			FieldPrefix: "meteringInputProcessorConsumerReceipt", TimeField: "committedAt", ReceiptSchemaVersion: 1,
			Members: consumerMembers(),
		},
		{
			ReceiptKind: "billing_finalization_coordinator", ReceiptType: "BillingFinalizationCoordinatorConsumerReceipt",
			FieldPrefix: "billingFinalizationCoordinatorConsumerReceipt", TimeField: "committedAt", ReceiptSchemaVersion: 1,
			Members: consumerMembers(),
		},
		{
			ReceiptKind: "billing_settlement_catch_up", ReceiptType: "BillingSettlementCatchUpConsumerReceipt",
			FieldPrefix: "billingSettlementCatchUpConsumerReceipt", TimeField: "committedAt", ReceiptSchemaVersion: 1,
			Members: consumerMembers(),
		},
	}
}

// Destinations are the reference release's four destinations (SPEC §3.4), one per reference
// consumer (All), bound to its receipt kind.
func Destinations() []pgcall.DestinationParams {
	kinds := map[string]pgcall.ReceiptKindParams{}
	for _, k := range ReceiptKinds() {
		kinds[k.ReceiptKind] = k
	}
	var out []pgcall.DestinationParams
	for _, s := range All() {
		k := kinds[string(s.Kind)]
		out = append(out, pgcall.DestinationParams{
			Destination: s.Destination, ConsumerName: s.ConsumerName, ReceiptKind: k.ReceiptKind,
			ReceiptType: k.ReceiptType, ReceiptSchemaVersion: k.ReceiptSchemaVersion,
			ProjectionRequired: s.ProjectionName != "", Ordering: pgcall.OrderingNone,
		})
	}
	return out
}

// EnvelopeRefinement is one R-AP-7 refinement of the reference release.
type EnvelopeRefinement struct {
	EventType, EventSchemaVersion string
	RequiredMembers               []string
}

// EnvelopeRefinements are the reference release's two refinements (SPEC §3.4, R-AP-7).
func EnvelopeRefinements() []EnvelopeRefinement {
	return []EnvelopeRefinement{
		{RunCreated.EventType, RunCreated.SchemaVersion, []string{"correlationId", "operationId"}},
		{WalletReserved.EventType, WalletReserved.SchemaVersion, []string{"causationId", "correlationId", "operationId"}},
	}
}

// InstallHash identifies what Install and InstallBase put into a database (the definitions and
// the embedded SQL): a template database built with them is reusable while it is unchanged
// (internal/pgoutboxtest/testdb adds it to the migrations' hash).
func InstallHash() string {
	h := sha256.New()
	for _, v := range []any{ReceiptKinds(), Destinations(), EnvelopeRefinements()} {
		b, _ := json.Marshal(v)
		h.Write(b)
	}
	h.Write([]byte(mailboxEffectDDL))
	return hex.EncodeToString(h.Sum(nil))
}

// InstallRegistry registers the reference receipt kinds, destinations and envelope
// refinements through outbox.register_receipt_kind, outbox.register_destination and
// outbox.register_envelope_refinement (insert-or-compare: a second run changes nothing).
// db must act as outbox_registrar.
func InstallRegistry(ctx context.Context, db pgcall.DBTX) error {
	for _, k := range ReceiptKinds() {
		if err := pgcall.RegisterReceiptKind(ctx, db, k); err != nil {
			return fmt.Errorf("receipt kind %s: %w", k.ReceiptKind, err)
		}
	}
	for _, d := range Destinations() {
		if err := pgcall.RegisterDestination(ctx, db, d); err != nil {
			return fmt.Errorf("destination %s: %w", d.Destination, err)
		}
	}
	for _, r := range EnvelopeRefinements() {
		if err := pgcall.RegisterEnvelopeRefinement(ctx, db, r.EventType, r.EventSchemaVersion, r.RequiredMembers); err != nil {
			return fmt.Errorf("envelope refinement %s (schema %s): %w", r.EventType, r.EventSchemaVersion, err)
		}
	}
	return nil
}

// InstallMailboxEffect creates the reference mailbox handler's effect (schema refmailbox, its
// two tables and refmailbox.apply_reference_effect for outbox_mailbox). db acts as the
// connecting user (the function calls the kernel's mailbox fence as its owner).
func InstallMailboxEffect(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, mailboxEffectDDL); err != nil {
		return fmt.Errorf("install mailbox effect: %w", err)
	}
	return nil
}

// asRegistrar runs fn in one transaction as outbox_registrar (SET LOCAL ROLE).
func asRegistrar(ctx context.Context, conn *pgx.Conn, fn func(tx pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit a no-op
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE outbox_registrar"); err != nil {
		return fmt.Errorf("set role outbox_registrar (the connecting user must be granted it): %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// InstallBase installs what the kernel's migrations installed for the reference before 041:
// the registry part (InstallRegistry, as outbox_registrar) and the mailbox effect (as the
// connecting user). The test databases of internal/pgoutboxtest/testdb are built with it.
func InstallBase(ctx context.Context, conn *pgx.Conn) error {
	if err := asRegistrar(ctx, conn, func(tx pgx.Tx) error { return InstallRegistry(ctx, tx) }); err != nil {
		return err
	}
	return InstallMailboxEffect(ctx, conn)
}

// Install installs the whole reference release on a database migrated with the kernel's
// migrations (`make migrate-reference`): InstallBase, then as outbox_registrar the projection
// version of the operations projector (ProjectionName@ProjectionVersion, semantic digest
// unknown, like a delivery-set activation registers it) and the observation part
// (LoadObservations: schemas and projector), and as the connecting user the domain schemas of
// the four reference consumers (granted to outbox_consumer) and of the observation projector.
// The delivery set itself is registered and activated by `outboxctl release register-reference`
// / `activate-reference`. Every step is insert-or-compare or IF NOT EXISTS: a second run
// changes nothing.
func Install(ctx context.Context, conn *pgx.Conn) error {
	if conn == nil {
		return errors.New("reference install: no connection")
	}
	if err := InstallBase(ctx, conn); err != nil {
		return err
	}
	obs, err := LoadObservations()
	if err != nil {
		return err
	}
	if err := asRegistrar(ctx, conn, func(tx pgx.Tx) error {
		if _, err := pgcall.RegisterProjectionVersion(ctx, tx, ProjectionName, ProjectionVersion, pgcall.UnknownSemanticDigest); err != nil {
			return fmt.Errorf("projection version %s@%d: %w", ProjectionName, ProjectionVersion, err)
		}
		_, err := release.RegisterObservations(ctx, tx, obs)
		return err
	}); err != nil {
		return err
	}
	for _, s := range All() {
		if err := s.Install(ctx, conn, "outbox_consumer"); err != nil {
			return err
		}
	}
	return InstallObservationLog(ctx, conn, "", "")
}

// FreshDatabase is migrate.FreshDatabase with the reference release installed (Install): the
// database the demo, the soak and the benchmarks run the reference release on (producer and
// consumer databases alike - the consumer kit's inbox functions read the receipt kinds of the
// consumer's own database).
func FreshDatabase(ctx context.Context, serverURL, name string) (string, error) {
	u, err := migrate.FreshDatabase(ctx, serverURL, name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if err := Install(ctx, conn); err != nil {
		return "", fmt.Errorf("reference release on %s: %w", name, err)
	}
	return u, nil
}
