// Command orders-service is the embedding example's service: it runs the pgoutbox dispatcher
// inside its own process with its own transport (package embedded) and a mailer that only logs.
//
//	PGOUTBOX_DATABASE_URL=postgres://… orders-service -config examples/embedded/dispatcher.toml
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/examples/embedded"
)

// logMailer stands in for a real mail service.
type logMailer struct{ log *slog.Logger }

func (m logMailer) Send(_ context.Context, orderID, _ string) (string, error) {
	id := "order-confirmation:" + orderID
	m.log.Info("confirmation queued", "message_id", id)
	return id, nil
}

func main() {
	cfgPath := flag.String("config", "examples/embedded/dispatcher.toml", "dispatcher configuration")
	flag.Parse()
	log := dispatcher.NewLogger(os.Stderr, "info")
	if err := run(*cfgPath, log); err != nil {
		fmt.Fprintln(os.Stderr, "orders-service:", err)
		os.Exit(1)
	}
}

func run(cfgPath string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := dispatcher.LoadConfig(cfgPath, os.LookupEnv)
	if err != nil {
		return err
	}
	pc, err := dispatcher.PoolConfig(cfg, os.Getenv("PGOUTBOX_DATABASE_URL"))
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	return embedded.Run(ctx, pool, cfg, logMailer{log}, log)
}
