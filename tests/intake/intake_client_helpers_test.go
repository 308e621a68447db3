package intake

// Helpers of the intake client tests (package intake, issue 22 item 5): a pool whose sessions
// run as a workload role (SET ROLE on connect, as the test roles are NOLOGIN), metric reads from
// the registry the client registered on, and a barrier that waits until a backend waits for a
// lock. Prefixed ikc.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/intake"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
)

// ikcPool opens a pool on dsn whose every connection runs as role (SET ROLE in AfterConnect),
// closed when the test ends.
func ikcPool(t *testing.T, dsn, role string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, fmt.Sprintf("SET ROLE %s", pgx.Identifier{role}.Sanitize()))
		return err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ikcClient builds a client over pool registering its metrics on a fresh registry; the client
// is closed when the test ends (a no-op when the test closed it).
func ikcClient(t *testing.T, pool *pgxpool.Pool, o intake.Options) (*intake.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	if o.Workload == "" {
		o.Workload = intakefix.WorkloadA
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := intake.New(pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, reg
}

// ikcMetric reads one series of the client's metrics: name without the pgoutbox_intake_client_
// prefix, the one variable label's value ("" for none). It fails when the series is missing or
// carries another workload label than intakefix.WorkloadA.
func ikcMetric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	full := "pgoutbox_intake_client_" + name
	for _, f := range fams {
		if f.GetName() != full {
			continue
		}
		for _, m := range f.GetMetric() {
			var workload, value string
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "workload" {
					workload = lp.GetValue()
				} else {
					value = lp.GetValue()
				}
			}
			if workload != intakefix.WorkloadA {
				t.Fatalf("%s: workload label %q", full, workload)
			}
			if value == label {
				return ikcValue(m)
			}
		}
	}
	t.Fatalf("no series %s{%s}", full, label)
	return 0
}

func ikcValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

// ikcWaitLockWaiter blocks until a backend waits for a lock on relation (a barrier: the client's
// call is inside the database, behind the test's lock) and returns its pid; a waiter with pid
// exclude (a backend already terminated) does not count.
func ikcWaitLockWaiter(t *testing.T, admin *pgx.Conn, relation string, exclude int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid int
		err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_locks
			WHERE NOT granted AND relation = $1::regclass AND pid <> $2
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY pid LIMIT 1`, relation, exclude).Scan(&pid)
		if err == nil {
			return pid
		}
		if err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend waits for a lock on %s", relation)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ikcSub is a valid Submission for id (the intakefix.Sub body).
func ikcSub(t *testing.T, id string) intake.Submission {
	t.Helper()
	body, err := json.Marshal(intakefix.Sub(id)["body"])
	if err != nil {
		t.Fatal(err)
	}
	return intake.Submission{ObservationID: id, ObservationType: "request_attempt", ObservationSchemaVersion: 1, Body: body}
}
