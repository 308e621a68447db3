package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/readmodel"
)

// runServe serves the read-only status page (GET /status, with the exact-id search box) and the
// read-model gauges (GET /metrics) as outbox_auditor (SPEC R-OP-4, R-OP-3). It refuses to start
// when the session could execute any kernel write function: auditor credentials only.
//
//	outboxctl serve [-listen 127.0.0.1:8089]
func runServe(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:8089", "address of the status page")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return fmt.Errorf("%w: serve takes only -listen ADDR", errUsage)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	pc.MaxConns = 4
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE outbox_auditor")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := readmodel.CheckAuditorOnly(ctx, pool); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := &http.Server{Handler: &readmodel.Server{DB: pool, Gauges: readmodel.NewGauges(), Logger: log},
		ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 60 * time.Second}
	fmt.Fprintf(out, "serving http://%s/status (read-only, outbox_auditor)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
