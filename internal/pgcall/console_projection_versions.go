package pgcall

import (
	"context"
	"time"
)

// ProjectionVersionRow is one row of outbox.console_projection_versions: a registered projection
// version, its content row source and its most recent build (nil fields: none).
type ProjectionVersionRow struct {
	ProjectionName           string
	ProjectionVersion        int
	State                    string // active | shadow | frozen | retired
	SemanticDefinitionSHA256 string
	RegisteredAt             time.Time
	RowSource                *string
	BuildID                  *string
	BuildState               *string
	BuildStartedAt           *time.Time
	SourcesBuilt             *int64
}

const consoleProjectionVersionsSQL = `SELECT projection_name, projection_version, state, semantic_definition_sha256, registered_at,
	row_source, build_id::text, build_state, build_started_at, sources_built FROM outbox.console_projection_versions($1::int)`

// ConsoleProjectionVersions calls outbox.console_projection_versions: at most limit (1..1000,
// else 22023) versions by name and version. Caller role: outbox_auditor.
func ConsoleProjectionVersions(ctx context.Context, db DBTX, limit int) ([]ProjectionVersionRow, error) {
	rows, err := db.Query(ctx, consoleProjectionVersionsSQL, limit)
	if err != nil {
		return nil, interpretError("console projection versions", err)
	}
	defer rows.Close()
	var out []ProjectionVersionRow
	for rows.Next() {
		var r ProjectionVersionRow
		if err := rows.Scan(&r.ProjectionName, &r.ProjectionVersion, &r.State, &r.SemanticDefinitionSHA256, &r.RegisteredAt,
			&r.RowSource, &r.BuildID, &r.BuildState, &r.BuildStartedAt, &r.SourcesBuilt); err != nil {
			return nil, interpretError("console projection versions", err)
		}
		out = append(out, r)
	}
	return out, interpretError("console projection versions", rows.Err())
}
