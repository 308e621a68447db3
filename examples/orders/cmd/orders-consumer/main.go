// Command orders-consumer serves the orders example's two consumers (package orders) over the
// HTTP wire contract (docs/transport-http.md), one path per destination on one listen address:
//
//	POST /order_email    order_email_sender   (OrderEmailReceipt)
//	POST /order_ledger   order_ledger_writer  (OrderLedgerReceipt)
//	GET  /healthz        200 while the process runs
//
// Every request must carry the dispatcher's v1 HMAC signature with the secret in
// ORDERS_HMAC_SECRET (at least 16 bytes; the dispatcher reads the same variable, see
// examples/orders/dispatcher.toml). The consumers write to the database named by -db (default
// $PGOUTBOX_URL, then $DATABASE_URL): a database migrated with the kernel's migrations (it has
// the inbox schema) whose outbox.receipt_kinds knows order_email and order_ledger
// (examples/orders/register.sql). At start the example's tables are created (orders.Install).
//
//	ORDERS_HMAC_SECRET=… orders-consumer [-listen 127.0.0.1:8091] [-db URL] [-role outbox_consumer]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/examples/orders"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orders-consumer:", err)
		os.Exit(1)
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func run(args []string) error {
	fs := flag.NewFlagSet("orders-consumer", flag.ContinueOnError)
	listen := fs.String("listen", firstNonEmpty(os.Getenv("ORDERS_LISTEN"), "127.0.0.1:8091"), "listen address")
	dbURL := fs.String("db", firstNonEmpty(os.Getenv("PGOUTBOX_URL"), os.Getenv("DATABASE_URL")), "the consumers' database URL")
	role := fs.String("role", "outbox_consumer", "role SET LOCAL in every transaction (a member of outbox_consumer); \"\" keeps the login role")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := os.Getenv("ORDERS_HMAC_SECRET")
	switch {
	case *dbURL == "":
		return errors.New("no database: pass -db or set PGOUTBOX_URL")
	case len(secret) < 16:
		return errors.New("ORDERS_HMAC_SECRET must be set to at least 16 bytes (the dispatcher signs with it)")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := orders.Install(ctx, pool, *role); err != nil {
		return err
	}
	mux := http.NewServeMux()
	for _, cfg := range []consumer.Config{orders.EmailConfig(pool), orders.LedgerConfig(pool)} {
		cfg.Role, cfg.HMACSecret, cfg.Logger = *role, []byte(secret), log
		c, err := consumer.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.ConsumerName, err)
		}
		mux.Handle("POST /"+cfg.Destination, c)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })

	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 120 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	fmt.Printf("orders-consumer listening on %s (POST /order_email, POST /order_ledger)\n", l.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
