package main

import (
	"context"
	"fmt"
	"io"

	"github.com/oceanway/pgoutbox/reference"
)

// runReference: `outboxctl reference install` (make migrate-reference, SPEC D-1) installs the
// reference release through reference.Install; a second run changes nothing.
func runReference(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) != 1 || args[0] != "install" {
		return errUsage
	}
	conn, err := connectAs(ctx, dsn, "")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := reference.Install(ctx, conn); err != nil {
		return fmt.Errorf("reference install: %w", err)
	}
	fmt.Fprintln(out, "reference release installed")
	return nil
}
