package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/readmodel"
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
	if args[0] == "take" && len(args) >= 3 && args[1] == "-inbox-db" {
		return runProofTwoPart(ctx, conn, args[2], args[3:], out)
	}
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
	return fmt.Errorf("%w: proof take [-inbox-db URL] [SCOPE_JSON] | check ID | show ID | search KIND ID", errUsage)
}

// runProofTwoPart: the projector's inbox is another database - the producer's proof is stored,
// then the inbox is snapshotted and the two-part proof document printed (R-OP-2).
func runProofTwoPart(ctx context.Context, producer *pgx.Conn, inboxURL string, args []string, out io.Writer) error {
	scope := "{}"
	if len(args) == 1 {
		scope = args[0]
	} else if len(args) > 1 {
		return fmt.Errorf("%w: proof take -inbox-db URL [SCOPE_JSON]", errUsage)
	}
	inbox, err := connectAs(ctx, inboxURL, "outbox_auditor")
	if err != nil {
		return fmt.Errorf("inbox database: %w", err)
	}
	defer inbox.Close(context.WithoutCancel(ctx))
	p, err := readmodel.TakeTwoPart(ctx, producer, inbox, json.RawMessage(scope))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "manifest_id %s\nmanifest_sha256 %s\ntwo_part_sha256 %s\nstatus %s\n%s\n",
		p.Producer.ManifestID, p.Producer.ManifestSHA256, p.SHA256, p.Status, p.Document)
	return err
}
