//go:build bench

package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// ceilingSchema is the bare write set of one delivery's life (SPEC §12a P-8, issue 35 item 1)
// with plain SQL and no checks: the event, one work row per open delivery, the attempt start,
// the attempt finish and the publication; no functions, no triggers, no constraints beyond the
// primary keys.
const ceilingSchema = `
DROP SCHEMA IF EXISTS ceiling CASCADE;
CREATE SCHEMA ceiling;
CREATE TABLE ceiling.events (event_id bigint PRIMARY KEY, event_type text NOT NULL, aggregate_id text NOT NULL,
    payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE ceiling.work (event_id bigint PRIMARY KEY, destination text NOT NULL,
    available_at timestamptz NOT NULL DEFAULT now(), lease_token bigint, attempts int NOT NULL DEFAULT 0);
CREATE INDEX ceiling_work_claimable ON ceiling.work (available_at, event_id);
CREATE TABLE ceiling.attempt_starts (event_id bigint NOT NULL, attempt int NOT NULL, lease_token bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (event_id, attempt));
CREATE TABLE ceiling.attempt_finishes (event_id bigint NOT NULL, attempt int NOT NULL, outcome text NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (event_id, attempt));
CREATE TABLE ceiling.publications (event_id bigint PRIMARY KEY, published_at timestamptz NOT NULL DEFAULT now());
`

// ceiling is -mode ceiling: the n events and their work rows appended as a backlog (plain
// INSERTs, transactions of o.txSize), then o.workers connections each loop, timed from the start
// to the last finish: claim o.batch work rows FOR UPDATE SKIP LOCKED, set their lease and write
// the attempt starts (one transaction), then write the finishes and the publications and delete
// the work rows (a second transaction). Reported like p1: deliveries/s and WAL per delivery of
// the measured phase; the report sets pgoutbox's P-1 against it (pgoutbox / ceiling).
func ceiling(ctx context.Context, admin *pgx.Conn, dsn string, o options) (string, error) {
	if _, err := admin.Exec(ctx, ceilingSchema); err != nil {
		return "", fmt.Errorf("ceiling schema: %w", err)
	}
	pay := string(payload(0, o.payload))
	for i := 0; i < o.n; i += o.txSize {
		hi := min(i+o.txSize, o.n)
		if _, err := admin.Exec(ctx, `WITH e AS (
				INSERT INTO ceiling.events (event_id, event_type, aggregate_id, payload)
				SELECT g, $3, 'sbs-' || g, $4::jsonb FROM generate_series($1::bigint, $2::bigint) AS g
				RETURNING event_id)
			INSERT INTO ceiling.work (event_id, destination) SELECT e.event_id, $5 FROM e`,
			i+1, hi, eventType, pay, destination); err != nil {
			return "", fmt.Errorf("ceiling backlog: %w", err)
		}
	}
	for _, t := range []string{"ceiling.events", "ceiling.work"} {
		if _, err := admin.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return "", err
		}
	}
	var lsn0 string
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn0); err != nil {
		return "", err
	}
	var (
		done    atomic.Int64
		lastEnd atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		workErr error
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := 0; w < o.workers; w++ {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return "", err
		}
		defer conn.Close(context.Background())
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			token := int64(w) << 40
			for wctx.Err() == nil {
				token++
				var ids []int64
				var attempts []int32
				rows, err := conn.Query(wctx, `WITH c AS (
						SELECT w.event_id FROM ceiling.work w
						 WHERE w.available_at <= now()
						 ORDER BY w.available_at, w.event_id
						 LIMIT $1 FOR UPDATE SKIP LOCKED
					), u AS (
						UPDATE ceiling.work w SET lease_token = $2, attempts = w.attempts + 1,
						       available_at = now() + interval '1 minute'
						  FROM c WHERE w.event_id = c.event_id
						RETURNING w.event_id, w.attempts
					), s AS (
						INSERT INTO ceiling.attempt_starts (event_id, attempt, lease_token)
						SELECT u.event_id, u.attempts, $2 FROM u
						RETURNING event_id, attempt
					)
					SELECT event_id, attempt FROM s`, o.batch, token)
				if err == nil {
					var id int64
					var a int32
					_, err = pgx.ForEachRow(rows, []any{&id, &a}, func() error { ids = append(ids, id); attempts = append(attempts, a); return nil })
				}
				if err != nil {
					errOnce.Do(func() { workErr = fmt.Errorf("ceiling claim: %w", err); cancel() })
					return
				}
				if len(ids) == 0 {
					return // the backlog is worked off
				}
				if _, err := conn.Exec(wctx, `WITH f AS (
						INSERT INTO ceiling.attempt_finishes (event_id, attempt, outcome)
						SELECT i, a, 'acknowledged' FROM unnest($1::bigint[], $2::int[]) AS x(i, a)
					), p AS (
						INSERT INTO ceiling.publications (event_id) SELECT unnest($1::bigint[])
					)
					DELETE FROM ceiling.work w WHERE w.event_id = ANY ($1::bigint[]) AND w.lease_token = $3`,
					ids, attempts, token); err != nil {
					errOnce.Do(func() { workErr = fmt.Errorf("ceiling finish: %w", err); cancel() })
					return
				}
				done.Add(int64(len(ids)))
				lastEnd.Store(time.Now().UnixNano())
			}
		}(w)
	}
	wg.Wait()
	if workErr != nil {
		return "", workErr
	}
	elapsed := time.Unix(0, lastEnd.Load()).Sub(start)
	var wal float64
	var left, published int64
	if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8,
			(SELECT count(*) FROM ceiling.work), (SELECT count(*) FROM ceiling.publications)`, lsn0).Scan(&wal, &left, &published); err != nil {
		return "", err
	}
	if left != 0 || published != int64(o.n) || done.Load() != int64(o.n) {
		return "", fmt.Errorf("incomplete ceiling run: %d work rows left, %d published, %d finished, want %d", left, published, done.Load(), o.n)
	}
	kv := []string{
		"deliveries_per_sec=" + rate(done.Load(), elapsed),
		"events=" + strconv.Itoa(o.n),
		"elapsed_s=" + strconv.FormatFloat(elapsed.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"workers=" + strconv.Itoa(o.workers),
		"batch=" + strconv.Itoa(o.batch),
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
		"wal_bytes_per_event=" + strconv.FormatFloat(wal/float64(o.n), 'f', 0, 64),
	}
	return "RESULT pgoutbox ceiling " + strings.Join(kv, " "), nil
}
