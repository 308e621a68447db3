package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

// connectAs opens one connection and switches to role, so that every call runs with exactly
// the privileges of that kernel role (the login user must be a member of it).
func connectAs(ctx context.Context, dsn, role string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if role != "" {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("set role %s (the login user must be granted %s): %w", role, role, err)
		}
	}
	return conn, nil
}

func runRelease(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "register-observations":
		if len(args) != 1 {
			return errUsage
		}
		r, err := reference.LoadObservations()
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_registrar")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		digests, err := release.RegisterObservations(ctx, conn, r)
		if err != nil {
			return err
		}
		for i, s := range r.ObservationSchemas {
			fmt.Fprintf(out, "observation schema %s@%d %s\n", s.ObservationType, s.ObservationSchemaVersion, digests[i])
		}
		for _, p := range r.Projectors {
			fmt.Fprintf(out, "observation projector %s %s@%d\n", p.ConsumerName, p.ProjectionName, p.ProjectionVersion)
		}
		return nil
	case "register":
		if len(args) < 2 || len(args) > 3 {
			return errUsage
		}
		return registerFile(ctx, dsn, args[1:], false, out)
	case "register-reference", "activate-reference":
		if len(args) != 1 {
			return errUsage
		}
		doc, err := reference.LoadRelease()
		if err != nil {
			return err
		}
		return registerRelease(ctx, dsn, doc, reference.SourceRelease, args[0] == "activate-reference", out)
	case "activate":
		if len(args) == 2 || len(args) == 3 {
			// release activate FILE [SOURCE_RELEASE]: a release document of the user's own,
			// registered (a no-op when the identical definition is) and activated.
			return registerFile(ctx, dsn, args[1:], true, out)
		}
		if len(args) != 5 {
			return errUsage
		}
		v, err1 := strconv.Atoi(args[1])
		s, err2 := strconv.Atoi(args[2])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%w: VERSION and SCHEMA are integers", errUsage)
		}
		conn, err := connectAs(ctx, dsn, "outbox_registrar")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		q := pgcall.Quartet{DeliverySetVersion: v, DefinitionSchemaVersion: s, DigestAlgorithmVersion: args[3], DefinitionDigest: args[4]}
		if err := pgcall.ActivateDeliverySet(ctx, conn, q); err != nil {
			return err
		}
		fmt.Fprintf(out, "activated %d %d %s %s\n", v, s, args[3], args[4])
		return nil
	case "list":
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		rows, err := pgcall.ListDeliverySets(ctx, conn)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSCHEMA\tALGORITHM\tDIGEST\tSTATUS\tACTIVATED_AT\tMEMBERS\tSOURCE_RELEASE")
		for _, r := range rows {
			at := "-"
			if r.ActivatedAt != nil {
				at = r.ActivatedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.DeliverySetVersion, r.DefinitionSchemaVersion,
				r.DigestAlgorithmVersion, r.DefinitionDigest, r.Status, at, r.MemberCount, r.SourceRelease)
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w: unknown release command %q", errUsage, args[0])
}

// registerFile registers the release document in args[0] (its digest computed here) with the
// source label args[1], else the file name, and activates it when activate is set.
func registerFile(ctx context.Context, dsn string, args []string, activate bool, out io.Writer) error {
	doc, err := release.LoadFile(args[0])
	if err != nil {
		return err
	}
	source := args[0]
	if len(args) == 2 {
		source = args[1]
	}
	return registerRelease(ctx, dsn, doc, source, activate, out)
}

// registerRelease registers doc as outbox_registrar (register_delivery_set is insert-or-compare:
// registering the identical definition again returns its quartet) and, with activate, activates
// that quartet. It prints the quartet after "registered" and, activated, after "activated".
func registerRelease(ctx context.Context, dsn string, doc json.RawMessage, source string, activate bool, out io.Writer) error {
	conn, err := connectAs(ctx, dsn, "outbox_registrar")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	q, err := pgcall.RegisterDeliverySet(ctx, conn, doc, source)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "registered %d %d %s %s\n", q.DeliverySetVersion, q.DefinitionSchemaVersion, q.DigestAlgorithmVersion, q.DefinitionDigest)
	if !activate {
		return nil
	}
	if err := pgcall.ActivateDeliverySet(ctx, conn, q); err != nil {
		return err
	}
	fmt.Fprintf(out, "activated %d %d %s %s\n", q.DeliverySetVersion, q.DefinitionSchemaVersion, q.DigestAlgorithmVersion, q.DefinitionDigest)
	return nil
}
