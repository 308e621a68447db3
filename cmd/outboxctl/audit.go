package main

import (
	"context"
	"io"

	"github.com/oceanway/pgoutbox/internal/audit"
)

func runAudit(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) != 0 {
		return errUsage
	}
	conn, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return audit.Write(ctx, conn, out)
}
