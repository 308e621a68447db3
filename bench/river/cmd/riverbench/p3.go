package main

// The P-3 anchor (SPEC §12a P-3, issue 21 item 3): a River worker doing the same work as
// pgoutbox's end-to-end figure - an HTTP call to a consumer that writes one row in its own
// database. See the package comment for how it is driven.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// HTTPArgs are BenchArgs of the kind the HTTP worker works.
type HTTPArgs BenchArgs

func (HTTPArgs) Kind() string { return "benchmark_http" }

// HTTPWorker POSTs the job's args to the consumer and succeeds on its 200.
type HTTPWorker struct {
	river.WorkerDefaults[HTTPArgs]
	url    string
	client *http.Client
}

func newHTTPWorker(url string, conns int) *HTTPWorker {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns, conns // keep-alive, as the dispatcher
	return &HTTPWorker{url: url, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (w *HTTPWorker) Work(ctx context.Context, job *river.Job[HTTPArgs]) error {
	body, err := json.Marshal(job.Args)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Job-Id", strconv.FormatInt(job.ID, 10))
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("consumer answered %d", resp.StatusCode)
	}
	return nil
}

// httpConsumer is the consumer side: an HTTP server writing one row per request into a table
// of its own database.
type httpConsumer struct {
	url          string
	srv          *http.Server
	pool         *pgxpool.Pool
	server, name string
	keep         bool
}

func startConsumer(ctx context.Context, server, name string, conns int, keep bool) (*httpConsumer, error) {
	dsn, err := freshDatabase(ctx, server, name)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE applied (job_id bigint PRIMARY KEY, args jsonb NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		pool.Close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, err
	}
	c := &httpConsumer{url: "http://" + l.Addr().String() + "/deliver", pool: pool, server: server, name: name, keep: keep}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

func (c *httpConsumer) serve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.Header.Get("Job-Id"), 10, 64)
	body, rerr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || rerr != nil || !json.Valid(body) {
		http.Error(w, `{"code":"bad_request"}`, http.StatusBadRequest)
		return
	}
	if _, err := c.pool.Exec(r.Context(), `INSERT INTO applied (job_id, args) VALUES ($1, $2::jsonb) ON CONFLICT (job_id) DO NOTHING`, id, string(body)); err != nil {
		http.Error(w, `{"code":"consumer_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (c *httpConsumer) rows(ctx context.Context) (int64, error) {
	var n int64
	err := c.pool.QueryRow(ctx, `SELECT count(*) FROM applied`).Scan(&n)
	return n, err
}

func (c *httpConsumer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = c.srv.Close()
	}
	c.pool.Close()
	if !c.keep {
		_ = dropDatabase(context.Background(), c.server, c.name)
	}
}
