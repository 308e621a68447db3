package pgcall

import "errors"

// Sentinel errors of the observation intake (SPEC §11a, §13: OB701..OB704; docs/errors.md).
// OB701, OB702 for an item and OB703 come back as an ObservationOutcome's SQLState, not as a Go
// error; OB704 (and OB702 from the register functions) is raised.
var (
	ErrObservationConflict = errors.New("observation integrity conflict")            // OB701
	ErrObservationInvalid  = errors.New("observation submission or schema invalid")  // OB702
	ErrObservationQuota    = errors.New("observation intake quota exceeded")         // OB703
	ErrNotAWorkload        = errors.New("session role is not a registered workload") // OB704
	// ErrProjectionNotRegistered: an observation projector (consumer, projection, version) that
	// intake.register_observation_projector never registered (OB802).
	ErrProjectionNotRegistered = errors.New("projection version not registered") // OB802
)

// The intake codes join the one SQLSTATE table (kept in their own file like the mailbox's).
func init() {
	SQLStates["OB701"] = ErrObservationConflict
	SQLStates["OB702"] = ErrObservationInvalid
	SQLStates["OB703"] = ErrObservationQuota
	SQLStates["OB704"] = ErrNotAWorkload
	SQLStates["OB802"] = ErrProjectionNotRegistered
}
