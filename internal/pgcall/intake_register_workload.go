package pgcall

import "context"

// RegisterWorkloadParams are the arguments of intake.register_workload (SPEC R-OB-1, R-OB-6).
// MaxPerMinute and MaxBodyBytes default to 6000 and 16384 when zero; DeploymentID is optional.
type RegisterWorkloadParams struct {
	DBRole              string
	WorkloadPrincipalID string
	Service             string
	Environment         string
	MaxPerMinute        int
	MaxBodyBytes        int
	DeploymentID        string
}

const registerWorkloadSQL = `SELECT intake.register_workload($1::name, $2::text, $3::text, $4::text, $5::integer, $6::integer, NULLIF($7::text, ''))`

// RegisterWorkload calls intake.register_workload: binds a database role to a trusted
// observation source with its quota; insert-or-compare. Errors: ErrObservationInvalid (OB702)
// registered with other values; 22023 an argument out of form. Caller role: outbox_registrar.
func RegisterWorkload(ctx context.Context, db DBTX, p RegisterWorkloadParams) error {
	if p.MaxPerMinute == 0 {
		p.MaxPerMinute = 6000
	}
	if p.MaxBodyBytes == 0 {
		p.MaxBodyBytes = 16384
	}
	_, err := db.Exec(ctx, registerWorkloadSQL, p.DBRole, p.WorkloadPrincipalID, p.Service, p.Environment,
		p.MaxPerMinute, p.MaxBodyBytes, p.DeploymentID)
	return interpretError("register workload", err)
}
