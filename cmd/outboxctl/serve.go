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

// runServe serves the read-only status page (GET /status, with the exact-id search box), the
// read-model gauges (GET /metrics) and the operator console (/console) as outbox_auditor (SPEC
// R-OP-4, R-OP-3; issue 25). It refuses to start when the read session could execute any kernel
// write function: auditor credentials only. With -operator it opens a second pool as
// outbox_operator (the same login must be a member of both roles) and enables the console's
// write actions, each audited and CSRF-protected: the redeliver of R-AK-10 and the pause/resume
// of a destination's claims (R-PV-2); that pool must be able to run those three functions and no
// other write function. -show-payloads lets the event page show a payload
// on explicit request (hidden by default).
//
//	outboxctl serve [-listen 127.0.0.1:8089] [-operator] [-show-payloads] [-refresh 5s]
func runServe(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:8089", "address of the status page")
	operator := fs.Bool("operator", false, "enable the console's actions (redeliver, pause/resume claims) with an outbox_operator session")
	payloads := fs.Bool("show-payloads", false, "allow the event page to show a payload on explicit request")
	refresh := fs.Duration("refresh", readmodel.DefaultLiveInterval, "how often the console overview re-fetches its live part (at least 1s)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *refresh < time.Second {
		return fmt.Errorf("%w: serve takes only -listen ADDR, -operator, -show-payloads, -refresh DURATION (at least 1s)", errUsage)
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
	handler := &readmodel.Server{DB: pool, Gauges: readmodel.NewGauges(), ShowPayloads: *payloads, LiveInterval: *refresh}
	mode := "read-only, outbox_auditor"
	if *operator {
		oc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return fmt.Errorf("database URL: %w", err)
		}
		oc.MaxConns = 2
		oc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE outbox_operator")
			return err
		}
		opool, err := pgxpool.NewWithConfig(ctx, oc)
		if err != nil {
			return fmt.Errorf("connect as operator: %w", err)
		}
		defer opool.Close()
		if err := readmodel.CheckOperatorOnly(ctx, opool); err != nil {
			return err
		}
		handler.Operator = opool
		mode = "outbox_auditor reads, redeliver and pause/resume as outbox_operator"
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	handler.Logger = log
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 60 * time.Second}
	fmt.Fprintf(out, "serving http://%s/status and /console (%s)\n", ln.Addr(), mode)
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
