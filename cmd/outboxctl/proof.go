package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// runProof takes, checks and shows completeness proofs and searches by exact id, as
// outbox_auditor (SPEC R-OP-2, R-OP-3). "take" runs in its own REPEATABLE READ transaction.
//
//	outboxctl proof take [SCOPE_JSON] | check MANIFEST_ID | show MANIFEST_ID | search KIND ID
func runProof(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	conn, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	switch {
	case args[0] == "take" && len(args) <= 2:
		scope := "{}"
		if len(args) == 2 {
			scope = args[1]
		}
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		s, err := pgcall.TakeCompletenessSnapshot(ctx, tx, json.RawMessage(scope))
		if err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "manifest_id %s\nmanifest_sha256 %s\nstatus %s\n", s.ManifestID, s.ManifestSHA256, s.Status)
		return err
	case args[0] == "check" && len(args) == 2:
		f, err := pgcall.CheckCompleteness(ctx, conn, args[1])
		if err != nil {
			return err
		}
		reason := "-"
		if f.Reason != nil {
			reason = *f.Reason
		}
		_, err = fmt.Fprintf(out, "%s %s\n", f.Freshness, reason)
		return err
	case args[0] == "show" && len(args) == 2:
		doc, err := pgcall.ReadManifest(ctx, conn, args[1])
		if err != nil {
			return err
		}
		if doc == nil {
			return fmt.Errorf("no manifest %s", args[1])
		}
		_, err = fmt.Fprintf(out, "%s\n", doc)
		return err
	case args[0] == "search" && len(args) == 3:
		hits, err := pgcall.SearchExactID(ctx, conn, args[1], args[2])
		if err != nil {
			return err
		}
		for _, h := range hits {
			s := func(p *string) string {
				if p == nil {
					return "-"
				}
				return *p
			}
			if _, err := fmt.Fprintf(out, "%s %s %s %s\n", h.Result, s(h.Reason), s(h.EventID), s(h.OperationID)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: proof take [SCOPE_JSON] | check ID | show ID | search KIND ID", errUsage)
}
