package pgcall

import "context"

// ErrorCode is one row of outbox.error_code_catalog: a normalized error code and its class.
type ErrorCode struct {
	Code        string
	Retryable   bool
	Description string
}

const errorCodeCatalogSQL = `SELECT code, retryable, description FROM outbox.error_code_catalog()`

// ErrorCodeCatalog calls outbox.error_code_catalog: the closed list of normalized error codes
// (outbox.error_codes, SPEC R-AK-7), sorted by code. The dispatcher reads it at preflight.
// Caller roles: outbox_dispatcher, outbox_consumer, outbox_auditor.
func ErrorCodeCatalog(ctx context.Context, db DBTX) ([]ErrorCode, error) {
	rows, err := db.Query(ctx, errorCodeCatalogSQL)
	if err != nil {
		return nil, interpretError("error code catalog", err)
	}
	defer rows.Close()
	var out []ErrorCode
	for rows.Next() {
		var e ErrorCode
		if err := rows.Scan(&e.Code, &e.Retryable, &e.Description); err != nil {
			return nil, interpretError("error code catalog", err)
		}
		out = append(out, e)
	}
	return out, interpretError("error code catalog", rows.Err())
}
