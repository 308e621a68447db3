package pgcall

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors for the kernel's SQLSTATEs (SPEC §13). The table of codes lives in one place
// in SQL (docs/errors.md) and is mirrored here; match with errors.Is, never on message text.
var (
	ErrFencingRejected       = errors.New("fencing rejected")                  // OB001
	ErrAckRejected           = errors.New("ack rejected")                      // OB002
	ErrDefinitionInvalid     = errors.New("delivery-set definition invalid")   // OB101
	ErrVersionConflict       = errors.New("delivery-set version conflict")     // OB102
	ErrNotApplicable         = errors.New("event pair not applicable")         // OB103
	ErrDeliverySetIncomplete = errors.New("delivery set incomplete at commit") // OB104
	ErrEnvelopeInvalid       = errors.New("envelope invalid")                  // OB105
	ErrNotCanonicalizable    = errors.New("document not canonicalizable")      // OB201
	ErrImmutable             = errors.New("immutability violation")            // OB202
	ErrReceiptConflict       = errors.New("receipt conflict")                  // OB301
	ErrNotRecorded           = errors.New("delivery not recorded")             // OB302
	ErrSnapshotIsolation     = errors.New("snapshot isolation required")       // OB501
	ErrRecoveryKeyConflict   = errors.New("recovery idempotency key conflict") // OB601
	ErrNotQuarantined        = errors.New("recovery refused: not quarantined") // OB602
	ErrPermissionDenied      = errors.New("permission denied")                 // 42501
)

// SQLStates maps each kernel SQLSTATE to its sentinel.
var SQLStates = map[string]error{
	"OB001": ErrFencingRejected,
	"OB002": ErrAckRejected,
	"OB101": ErrDefinitionInvalid,
	"OB102": ErrVersionConflict,
	"OB103": ErrNotApplicable,
	"OB104": ErrDeliverySetIncomplete,
	"OB105": ErrEnvelopeInvalid,
	"OB201": ErrNotCanonicalizable,
	"OB202": ErrImmutable,
	"OB301": ErrReceiptConflict,
	"OB302": ErrNotRecorded,
	"OB501": ErrSnapshotIsolation,
	"OB601": ErrRecoveryKeyConflict,
	"OB602": ErrNotQuarantined,
	"42501": ErrPermissionDenied,
}

// Error is a kernel error: the sentinel, the SQLSTATE and the server's message and detail.
// It unwraps to both the sentinel and the *pgconn.PgError.
type Error struct {
	Sentinel error
	PgErr    *pgconn.PgError
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s (%s): %s", e.Sentinel, e.PgErr.Code, e.PgErr.Message)
	if e.PgErr.Detail != "" {
		msg += ": " + e.PgErr.Detail
	}
	return msg
}

func (e *Error) Unwrap() []error { return []error{e.Sentinel, e.PgErr} }

// interpretError maps a *pgconn.PgError with a kernel SQLSTATE to an *Error and wraps anything
// else with the call's name.
func interpretError(call string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if s, ok := SQLStates[pgErr.Code]; ok {
			return fmt.Errorf("%s: %w", call, &Error{Sentinel: s, PgErr: pgErr})
		}
	}
	return fmt.Errorf("%s: %w", call, err)
}

// SQLState returns the SQLSTATE of err, or "" when err carries none.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// InterpretError is interpretError for the wrappers of functions outside the kernel (a
// release's own SQL, e.g. the reference mailbox effect): a kernel SQLSTATE becomes an *Error
// with its sentinel, anything else is wrapped with the call's name.
func InterpretError(call string, err error) error { return interpretError(call, err) }
