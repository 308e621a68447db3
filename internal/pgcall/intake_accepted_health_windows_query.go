package pgcall

// File name: intake_accepted_health_windows_query.go, not …_windows.go - a _windows suffix is a GOOS build constraint.

import (
	"context"
	"time"
)

// HealthWindow is one row of intake.accepted_health_windows (SPEC R-OB-5). LastAcceptedAt is
// zero when nothing was accepted in the window; Health is healthy | degraded | unknown.
type HealthWindow struct {
	WorkloadPrincipalID string
	WindowStart         time.Time
	WindowEnd           time.Time
	Accepted            int
	LastAcceptedAt      time.Time
	SendFailures        int
	IntakeRejections    int
	Health              string
}

const acceptedHealthWindowsSQL = `SELECT workload_principal_id, window_start, window_end, accepted,
       last_accepted_at, send_failures, intake_rejections, health
FROM intake.accepted_health_windows($1::timestamptz, $2::timestamptz, $3::interval)`

// AcceptedHealthWindows calls intake.accepted_health_windows: per registered workload and window
// of width between from and to, what the intake heard (no coverage percentage). Errors: 22023
// bounds. Caller role: outbox_auditor.
func AcceptedHealthWindows(ctx context.Context, db DBTX, from, to time.Time, width time.Duration) ([]HealthWindow, error) {
	rows, err := db.Query(ctx, acceptedHealthWindowsSQL, from, to, intervalString(width))
	if err != nil {
		return nil, interpretError("accepted health windows", err)
	}
	defer rows.Close()
	var out []HealthWindow
	for rows.Next() {
		var h HealthWindow
		var last *time.Time
		if err := rows.Scan(&h.WorkloadPrincipalID, &h.WindowStart, &h.WindowEnd, &h.Accepted, &last,
			&h.SendFailures, &h.IntakeRejections, &h.Health); err != nil {
			return nil, interpretError("accepted health windows", err)
		}
		if last != nil {
			h.LastAcceptedAt = *last
		}
		out = append(out, h)
	}
	return out, interpretError("accepted health windows", rows.Err())
}
