package pgcall

import "errors"

// Sentinel errors of projection versions (SPEC §11b, §13: OB801..OB810; docs/errors.md). OB802
// is ErrProjectionNotRegistered (intake_errors.go): the observation projector's registration and
// the projection version registry share the code.
var (
	ErrProjectionVersionConflict = errors.New("projection version conflict")                              // OB801
	ErrOutsideCutoverBoundary    = errors.New("source outside the frozen cutover boundary")               // OB803
	ErrCutoverInProgress         = errors.New("cutover already in progress for this projection")          // OB804
	ErrRetargetOutsideCutover    = errors.New("delivery-set activation retargets outside cutover")        // OB808
	ErrProjectionVersionInUse    = errors.New("projection version still targeted or the rollback target") // OB809
	ErrCutoverAcrossDatabases    = errors.New("cutover across databases refused")                         // OB810
)

func init() {
	SQLStates["OB801"] = ErrProjectionVersionConflict
	SQLStates["OB803"] = ErrOutsideCutoverBoundary
	SQLStates["OB804"] = ErrCutoverInProgress
	SQLStates["OB808"] = ErrRetargetOutsideCutover
	SQLStates["OB809"] = ErrProjectionVersionInUse
	SQLStates["OB810"] = ErrCutoverAcrossDatabases
}
