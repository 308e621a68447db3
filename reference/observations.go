package reference

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

//go:embed observations.sql
var observationsDDL string

// The reference observation projector of the reference release (ObservationsPath,
// reference/releases/oceanway-observations.v1.json, SPEC R-OB-4).
const (
	ObservationProjectorConsumer = "observation_projector"
	ObservationProjection        = "observation_log"
	ObservationProjectionVersion = 1
	ObservationSchema            = "refconsumer_observations"
)

// ObservationProjector projects accepted observations into an observation log: it claims them
// under fenced leases (intake.claim_observations, as outbox_observation_projector), applies each
// one in a transaction of its own database with its receipt (inbox.record_observation_receipt,
// as the login bound to ObservationProjectorConsumer), then acknowledges the batch
// (intake.ack_observations). A claimed envelope that does not hash to its digest is not applied
// and not acknowledged (its lease expires and it comes back; the error is returned).
type ObservationProjector struct {
	Claimer pgcall.DBTX         // role outbox_observation_projector
	Inbox   consumer.TxBeginner // the bound consumer login, with INSERT on Schema's tables
	Schema  string              // default ObservationSchema
	Worker  string              // lease owner literal; default "observation-projector"
	Batch   int                 // default 100
	Lease   time.Duration       // default 30s
}

// InstallObservationLog creates the projector's schema (idempotent) and grants it to grantee
// ("" grants nothing).
func InstallObservationLog(ctx context.Context, db Execer, schema, grantee string) error {
	if schema == "" {
		schema = ObservationSchema
	}
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := db.Exec(ctx, strings.ReplaceAll(observationsDDL, "__schema__", s)); err != nil {
		return fmt.Errorf("install observation log %s: %w", schema, err)
	}
	if grantee == "" {
		return nil
	}
	role := pgx.Identifier{grantee}.Sanitize()
	if _, err := db.Exec(ctx, fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA %[1]s TO %[2]s;`, s, role)); err != nil {
		return fmt.Errorf("grant observation log %s to %s: %w", schema, grantee, err)
	}
	return nil
}

// acceptedEnvelope is the part of AcceptedObservationEnvelope@1 the log keeps.
type acceptedEnvelope struct {
	AcceptedAt               time.Time `json:"acceptedAt"`
	ObservationID            string    `json:"observationId"`
	ObservationType          string    `json:"observationType"`
	ObservationSchemaVersion int       `json:"observationSchemaVersion"`
	Source                   struct {
		WorkloadPrincipalID string `json:"workloadPrincipalId"`
	} `json:"source"`
	Body struct {
		Outcome        *string `json:"outcome"`
		NormalizedCode *string `json:"normalizedCode"`
	} `json:"body"`
}

// RunOnce claims one batch, applies and acknowledges it; it returns how many observations were
// acknowledged (0: nothing to do).
func (p *ObservationProjector) RunOnce(ctx context.Context) (int, error) {
	worker, batch, lease := p.Worker, p.Batch, p.Lease
	if worker == "" {
		worker = "observation-projector"
	}
	if batch <= 0 {
		batch = 100
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}
	schema := p.Schema
	if schema == "" {
		schema = ObservationSchema
	}
	claimed, err := pgcall.ClaimObservations(ctx, p.Claimer, worker, ObservationProjectorConsumer, batch, lease)
	if err != nil || len(claimed) == 0 {
		return 0, err
	}
	acks := make([]pgcall.ObservationAck, 0, len(claimed))
	var errs []error
	for _, c := range claimed {
		if err := p.apply(ctx, pgx.Identifier{schema}.Sanitize(), c); err != nil {
			errs = append(errs, fmt.Errorf("observation %s: %w", c.ObservationID, err))
			continue
		}
		acks = append(acks, pgcall.ObservationAck{ConsumerName: ObservationProjectorConsumer, ObservationID: c.ObservationID,
			LeaseToken: c.LeaseToken, AcceptedEnvelopeSHA256: c.AcceptedEnvelopeSHA256})
	}
	n := 0
	if len(acks) > 0 {
		out, err := pgcall.AckObservations(ctx, p.Claimer, acks)
		if err != nil {
			return 0, err
		}
		for _, o := range out {
			if o.Outcome == "acknowledged" {
				n++
			} else {
				errs = append(errs, fmt.Errorf("ack of observation %s rejected: %s %s", o.ObservationID, o.SQLState, o.Detail))
			}
		}
	}
	return n, errors.Join(errs...)
}

// apply writes the log row and the receipt in one transaction (a purged payload - nil envelope -
// must have its receipt already: it is only re-confirmed, never recorded without the row).
func (p *ObservationProjector) apply(ctx context.Context, schema string, c pgcall.ClaimedObservation) error {
	var env acceptedEnvelope
	if c.Envelope != nil {
		sum, err := canon.SHA256Hex(c.Envelope)
		if err != nil {
			return err
		}
		if sum != c.AcceptedEnvelopeSHA256 {
			return fmt.Errorf("envelope does not hash to its acceptedEnvelopeSha256")
		}
		if err := json.Unmarshal(c.Envelope, &env); err != nil {
			return err
		}
	}
	return pgx.BeginTxFunc(ctx, p.Inbox, pgx.TxOptions{}, func(tx pgx.Tx) error {
		outcome, err := pgcall.RecordObservationReceipt(ctx, tx, ObservationProjectorConsumer, ObservationProjection,
			ObservationProjectionVersion, c.ObservationID, c.AcceptedEnvelopeSHA256)
		if err != nil || outcome == "existing" {
			return err
		}
		if c.Envelope == nil { // purged before this projection recorded it: never claim it applied
			return fmt.Errorf("payload purged but no receipt of %s@%d: not applied", ObservationProjection, ObservationProjectionVersion)
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+schema+`.observation_log
    (observation_id, accepted_at, workload_principal_id, observation_type, observation_schema_version, outcome, normalized_code)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7)`, c.ObservationID, c.AcceptedAt, env.Source.WorkloadPrincipalID,
			env.ObservationType, env.ObservationSchemaVersion, env.Body.Outcome, env.Body.NormalizedCode)
		return err
	})
}

// Run calls RunOnce until ctx ends, waiting idle between empty batches; an error is returned
// after it was reported to onError (nil: ignored) only when ctx ends.
func (p *ObservationProjector) Run(ctx context.Context, idle time.Duration, onError func(error)) error {
	for {
		n, err := p.RunOnce(ctx)
		if err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(idle):
		}
	}
}
