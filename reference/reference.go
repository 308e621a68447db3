// Package reference is the OceanWay reference domain, kept out of the kernel (sql/, the
// dispatcher, the consumer kit, the mailbox pump): everything here is an example built on the
// public pieces, and a kernel installed without it carries no delivery set, no observation
// schema and no business handler. It holds
//
//   - the reference release documents (releases/, Releases, LoadRelease, LoadObservations):
//     the OceanWay first release (SPEC §3.4) and its observation part (§11a);
//   - the four reference consumers of SPEC R-CO-6, one per destination of the reference
//     release, built on the consumer kit (All, Lookup, Spec): operations_projector writes a
//     small operation timeline (operations.go, operations.sql); the other three record what
//     they received (recorder.sql). Each keeps its domain tables in its own schema of the
//     consumer's database (the inbox schema sits next to it, migrated by the kernel's
//     migrations);
//   - the reference observation projector (ObservationProjector, observations.sql);
//   - the reference mailbox handler (MailboxHandler, mailbox.go), a mailbox.Handler that
//     cmd/mailboxpump and the demo run by default, with its destination and release extension.
//
// Deployment of the consumers: each consumer uses its own database (or at least its own schema) and a login
// role that is a member of outbox_consumer (EXECUTE on the inbox functions) and holds USAGE on
// its schema and SELECT, INSERT, UPDATE on its tables (Install grants them).
package reference

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/receipt"
)

//go:embed operations.sql
var operationsDDL string

//go:embed recorder.sql
var recorderDDL string

// Consumer names and destinations of the reference release (SPEC §3.4).
const (
	OperationsProjector                    = "operations_projector"
	MeteringInputProcessorConsumer         = "metering_input_processor_consumer"
	BillingFinalizationCoordinatorConsumer = "billing_finalization_coordinator_consumer"
	BillingSettlementCatchUpConsumer       = "billing_settlement_catch_up_consumer"

	ProjectionName    = "operations_timeline"
	ProjectionVersion = 1
)

// Event types of the reference release.
var (
	RunCreated                         = consumer.EventKey{EventType: "run.created@2.0", SchemaVersion: "2.0"}
	WalletReserved                     = consumer.EventKey{EventType: "wallet.reserved@2.0", SchemaVersion: "2.0"}
	BillingFinalizationCommitted       = consumer.EventKey{EventType: "billing.finalization.committed@1", SchemaVersion: "1"}
	BillingSettlementTransition        = consumer.EventKey{EventType: "billing.settlement-transition.committed@1", SchemaVersion: "1"}
	BillingLateExposureCaseRequested   = consumer.EventKey{EventType: "billing.late-settlement-exposure.case-requested@1", SchemaVersion: "1"}
	BillingCaseResolutionApplied       = consumer.EventKey{EventType: "billing.case-resolution.applied@1", SchemaVersion: "1"}
	BillingLateCommandResult           = consumer.EventKey{EventType: "billing.late-settlement-command-result.committed@1", SchemaVersion: "1"}
	BillingReconciliationCaseRequested = consumer.EventKey{EventType: "billing.finalization-reconciliation.case-requested@1", SchemaVersion: "1"}
	BillingReconciliationResolution    = consumer.EventKey{EventType: "billing.finalization-reconciliation-resolution.applied@1", SchemaVersion: "1"}
	ExecutionAttemptEligibility        = consumer.EventKey{EventType: "execution.attempt-eligibility.finalized@1", SchemaVersion: "1"}
	GatewayEvidenceAvailability        = consumer.EventKey{EventType: "gateway.evidence-availability.current-changed@1", SchemaVersion: "1"}
	ExecutionRunFinalizationClosed     = consumer.EventKey{EventType: "execution.run-finalization.closed@1", SchemaVersion: "1"}
	MeteringSettlementInput            = consumer.EventKey{EventType: "metering.settlement-input.current-changed@1", SchemaVersion: "1"}
)

// The reference release's receipt kinds (SPEC R-AK-1a): rows of outbox.receipt_kinds registered
// for the reference release, not compiled into the kit (receipt.Catalog reads their rules from the
// database). broker_publication is the kernel's own (receipt.BrokerPublication).
const (
	OperationsProjectionKind           receipt.Kind = "operations_projection"
	MeteringInputProcessorKind         receipt.Kind = "metering_input_processor"
	BillingFinalizationCoordinatorKind receipt.Kind = "billing_finalization_coordinator"
	BillingSettlementCatchUpKind       receipt.Kind = "billing_settlement_catch_up"
)

// Spec is one reference consumer. Fields may be adjusted (e.g. Schema, Ordered) before Config.
type Spec struct {
	ConsumerName      string
	Destination       string
	Kind              receipt.Kind
	ProjectionName    string
	ProjectionVersion int
	// Events are exactly the pairs the reference release routes to Destination.
	Events []consumer.EventKey
	// Ordered: per-aggregate revision order (inbox.observe_revision). The operations projector
	// is ordered: every revision of an aggregate it receives must be routed to core_operations.
	Ordered bool
	// Schema holds the consumer's domain tables.
	Schema string
	ddl    string
	apply  func(s Spec, schema string) consumer.ApplyFunc
	mutate func(s Spec, schema string) consumer.MutateFunc // nil: Apply only (it reads)
}

// All returns the four reference consumers.
func All() []Spec {
	return []Spec{
		{
			ConsumerName: OperationsProjector, Destination: "core_operations", Kind: OperationsProjectionKind,
			ProjectionName: ProjectionName, ProjectionVersion: ProjectionVersion,
			Events: []consumer.EventKey{RunCreated, WalletReserved, BillingFinalizationCommitted, BillingSettlementTransition,
				BillingLateExposureCaseRequested, BillingCaseResolutionApplied, BillingLateCommandResult,
				BillingReconciliationCaseRequested, BillingReconciliationResolution},
			Ordered: true, Schema: "refconsumer_operations", ddl: operationsDDL, apply: operationsApply,
		},
		{
			ConsumerName: MeteringInputProcessorConsumer, Destination: "metering_input_processor",
			Kind:   MeteringInputProcessorKind,
			Events: []consumer.EventKey{ExecutionAttemptEligibility, GatewayEvidenceAvailability},
			Schema: "refconsumer_metering_input", ddl: recorderDDL, apply: recorderApply, mutate: recorderMutate,
		},
		{
			ConsumerName: BillingFinalizationCoordinatorConsumer, Destination: "billing_finalization_coordinator",
			Kind:   BillingFinalizationCoordinatorKind,
			Events: []consumer.EventKey{ExecutionRunFinalizationClosed, BillingReconciliationResolution},
			Schema: "refconsumer_billing_finalization", ddl: recorderDDL, apply: recorderApply, mutate: recorderMutate,
		},
		{
			ConsumerName: BillingSettlementCatchUpConsumer, Destination: "billing_settlement_catch_up",
			Kind:   BillingSettlementCatchUpKind,
			Events: []consumer.EventKey{MeteringSettlementInput},
			Schema: "refconsumer_billing_settlement", ddl: recorderDDL, apply: recorderApply, mutate: recorderMutate,
		},
	}
}

// Lookup returns the reference consumer named consumerName.
func Lookup(consumerName string) (Spec, bool) {
	for _, s := range All() {
		if s.ConsumerName == consumerName {
			return s, true
		}
	}
	return Spec{}, false
}

// Execer runs DDL (a *pgx.Conn, pgx.Tx or *pgxpool.Pool).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// DDL returns the consumer's domain schema DDL (idempotent: IF NOT EXISTS everywhere).
func (s Spec) DDL() string {
	return strings.ReplaceAll(s.ddl, "__schema__", pgx.Identifier{s.Schema}.Sanitize())
}

// Install creates the consumer's domain schema (idempotent) and grants it to grantee, the role
// the consumer's transactions run as ("" grants nothing: the installing role is the consumer's).
func (s Spec) Install(ctx context.Context, db Execer, grantee string) error {
	if _, err := db.Exec(ctx, s.DDL()); err != nil {
		return fmt.Errorf("install %s schema %s: %w", s.ConsumerName, s.Schema, err)
	}
	if grantee == "" {
		return nil
	}
	schema, role := pgx.Identifier{s.Schema}.Sanitize(), pgx.Identifier{grantee}.Sanitize()
	grants := fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %[1]s TO %[2]s;`, schema, role)
	if _, err := db.Exec(ctx, grants); err != nil {
		return fmt.Errorf("grant %s schema %s to %s: %w", s.ConsumerName, s.Schema, grantee, err)
	}
	return nil
}

// Config returns the kit configuration of this consumer over pool, in its documented default
// form: a consumer that only writes (the three recorders) applies through consumer.Config.Mutate
// — one database round trip per delivery, so pool must also be a consumer.Batcher (a
// *pgxpool.Pool) — and the operations projector, which reads while it applies, through Apply.
// The caller adds authentication (HMACSecret/BearerToken), Role, Logger and limits.
func (s Spec) Config(pool consumer.TxBeginner) consumer.Config {
	cfg := s.ApplyConfig(pool)
	if s.mutate != nil {
		cfg.Apply, cfg.Mutate = nil, s.mutate(s, pgx.Identifier{s.Schema}.Sanitize())
	}
	return cfg
}

// ApplyConfig is Config with the consumer's Apply form for every consumer (a transaction the kit
// opens, several round trips per delivery): for a caller that wraps Apply, dual-applies or
// rebuilds a projection (those run on the Apply path only).
func (s Spec) ApplyConfig(pool consumer.TxBeginner) consumer.Config {
	return consumer.Config{
		Pool: pool, Destination: s.Destination, ConsumerName: s.ConsumerName, ReceiptKind: s.Kind,
		ProjectionName: s.ProjectionName, ProjectionVersion: s.ProjectionVersion,
		SupportedEvents: append([]consumer.EventKey(nil), s.Events...), Ordered: s.Ordered,
		Apply: s.apply(s, pgx.Identifier{s.Schema}.Sanitize()),
	}
}

// OneRoundTrip reports whether this consumer has a Mutate form (its application only writes).
func (s Spec) OneRoundTrip() bool { return s.mutate != nil }

// MutateConfig is Config (the Mutate form where the consumer has one).
//
// Deprecated: Config is the one-round-trip form now; use Config.
func (s Spec) MutateConfig(pool consumer.TxBeginner) consumer.Config { return s.Config(pool) }

// New returns the kit for this consumer over pool (which loads the receipt catalog from the
// database); edit (optional) adjusts the configuration first (authentication, Role, Logger,
// limits).
func (s Spec) New(ctx context.Context, pool consumer.TxBeginner, edit func(*consumer.Config)) (*consumer.Consumer, error) {
	cfg := s.Config(pool)
	if edit != nil {
		edit(&cfg)
	}
	return consumer.New(ctx, cfg)
}

// countEffect is the effects counter every reference consumer bumps once per application.
func countEffect(ctx context.Context, tx pgx.Tx, schema string, ev consumer.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.effects AS e (event_id, event_type, applied_count)
VALUES ($1::uuid, $2::text, 1)
ON CONFLICT (event_id) DO UPDATE SET applied_count = e.applied_count + 1`, ev.EventID, ev.EventType)
	return err
}

// recorderApply records what the consumer received.
func recorderApply(_ Spec, schema string) consumer.ApplyFunc {
	return func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
		_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.received_events
    (event_id, event_type, event_schema_version, aggregate_id, aggregate_revision, envelope_sha256, occurred_at)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::timestamptz)
ON CONFLICT (event_id) DO NOTHING`,
			ev.EventID, ev.EventType, ev.EventSchemaVersion, ev.AggregateID, ev.AggregateRevision, ev.EnvelopeSHA256, ev.OccurredAt)
		if err != nil {
			return nil, err
		}
		if err := countEffect(ctx, tx, schema, ev); err != nil {
			return nil, err
		}
		return consumer.ReceiptFields{"consumerOutcome": "recorded"}, nil
	}
}

// recorderMutate is recorderApply as queued statements (the same two writes).
func recorderMutate(_ Spec, schema string) consumer.MutateFunc {
	insert := `INSERT INTO ` + schema + `.received_events
    (event_id, event_type, event_schema_version, aggregate_id, aggregate_revision, envelope_sha256, occurred_at)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::timestamptz)
ON CONFLICT (event_id) DO NOTHING`
	effect := `INSERT INTO ` + schema + `.effects AS e (event_id, event_type, applied_count)
VALUES ($1::uuid, $2::text, 1)
ON CONFLICT (event_id) DO UPDATE SET applied_count = e.applied_count + 1`
	return func(ev consumer.Event, q *consumer.Queue) (consumer.ReceiptFields, error) {
		q.Exec(insert, ev.EventID, ev.EventType, ev.EventSchemaVersion, ev.AggregateID, ev.AggregateRevision, ev.EnvelopeSHA256, ev.OccurredAt)
		q.Exec(effect, ev.EventID, ev.EventType)
		return consumer.ReceiptFields{"consumerOutcome": "recorded"}, nil
	}
}

// Querier reads (a *pgx.Conn, pgx.Tx or *pgxpool.Pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Effects reports how many distinct events this consumer applied and how many of them were
// applied more than once (must be 0: receipts make redelivery harmless, SPEC R-CO-1, R-AK-8).
func (s Spec) Effects(ctx context.Context, db Querier) (applied, duplicated int64, err error) {
	err = db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE applied_count > 1) FROM `+
		pgx.Identifier{s.Schema}.Sanitize()+`.effects`).Scan(&applied, &duplicated)
	return applied, duplicated, err
}
