package pgcall

import "errors"

// Sentinel errors of the mailbox pipeline (SPEC §13: OB401, OB402, OB403; docs/errors.md).
var (
	ErrMailboxConflict   = errors.New("mailbox message conflict")                     // OB401
	ErrMailboxWrongState = errors.New("mailbox outcome for a row in the wrong state") // OB402
	ErrMailboxPumpHeld   = errors.New("mailbox pump lock not held by this session")   // OB403
)

// The mailbox codes join the one SQLSTATE table (kept in its own file so the mailbox area can
// be merged without touching errors.go).
func init() {
	SQLStates["OB401"] = ErrMailboxConflict
	SQLStates["OB402"] = ErrMailboxWrongState
	SQLStates["OB403"] = ErrMailboxPumpHeld
}
