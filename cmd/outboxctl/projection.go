package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// runProjection: projection versions (SPEC §11b, docs/projection-versions.md). Each subcommand
// switches to the one kernel role its function is granted to.
func runProjection(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	version := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return 0, fmt.Errorf("%w: version %q is not a positive integer", errUsage, s)
		}
		return v, nil
	}
	switch {
	case args[0] == "list" && len(args) == 1:
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		rows, err := pgcall.ConsoleProjectionVersions(ctx, conn, 1000)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "projection\tversion\tstate\tsemantic digest\tcontent rows\tlatest build\tsources built")
		for _, r := range rows {
			src, build, built := "-", "none", "-"
			if r.RowSource != nil {
				src = *r.RowSource
			}
			if r.BuildState != nil {
				build = *r.BuildState
			}
			if r.SourcesBuilt != nil {
				built = strconv.FormatInt(*r.SourcesBuilt, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ProjectionName, r.ProjectionVersion, r.State,
				r.SemanticDefinitionSHA256, src, build, built)
		}
		return tw.Flush()
	case args[0] == "register" && len(args) == 4:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_registrar")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		st, err := pgcall.RegisterProjectionVersion(ctx, conn, args[1], v, args[3])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s@%d\n", st, args[1], v)
		return nil
	case args[0] == "rows" && len(args) == 4:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_registrar")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		st, err := pgcall.RegisterProjectionRows(ctx, conn, args[1], v, args[3])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s rows of %s@%d: %s\n", st, args[1], v, args[3])
		return nil
	case args[0] == "build" && len(args) == 3:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_projector")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		b, err := pgcall.StartShadowBuild(ctx, conn, args[1], v)
		if err != nil {
			return err
		}
		hook(projectionAfterBuild)
		fmt.Fprintf(out, "build %s of %s@%d\ntoken %s (pass it to the builder; a later build rotates it)\n", b.BuildID, args[1], v, b.BuildToken)
		return nil
	case args[0] == "digest" && len(args) == 3:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		d, err := pgcall.ProjectionDigest(ctx, conn, args[1], v)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s@%d %s\n", args[1], v, d)
		return nil
	case args[0] == "compare" && len(args) == 4:
		a, err := version(args[2])
		if err != nil {
			return err
		}
		b, err := version(args[3])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		c, err := pgcall.CompareProjectionVersions(ctx, conn, args[1], a, b)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "same %t\n%s@%d %s rows %d\n%s@%d %s rows %d\nreceipt anti-join %d, open gaps %d, open quarantine %d\n",
			c.Same, args[1], a, c.DigestA, c.RowsA, args[1], b, c.DigestB, c.RowsB, c.AntiJoin, c.OpenGaps, c.OpenQuarantine)
		if len(c.SampleDifferences) > 0 {
			fmt.Fprintf(out, "differing keys (first %d): %s\n", len(c.SampleDifferences), strings.Join(c.SampleDifferences, ", "))
		}
		return nil
	case args[0] == "progress" && len(args) == 2:
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		p, err := pgcall.CandidateProgressOf(ctx, conn, args[1])
		if err != nil {
			return err
		}
		if !p.KnownBuild {
			return fmt.Errorf("no build %s", args[1])
		}
		fmt.Fprintf(out, "%s %s built %d, remaining %d, lag %.0f s\n", progressBar(p.Built, p.Remaining), p.State, p.Built, p.Remaining, p.LagSeconds)
		return nil
	case args[0] == "freeze" && len(args) == 3:
		conn, err := connectAs(ctx, dsn, "outbox_projector")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		b, err := pgcall.FreezeCutoverCandidate(ctx, conn, args[1], args[2])
		if err != nil {
			return err
		}
		hook(projectionAfterFreeze)
		fmt.Fprintf(out, "boundary %s %s\ntoken %s (the old token is void)\n", b.BoundaryID, b.BoundarySHA256, b.BuildToken)
		return nil
	case (args[0] == "pause" && len(args) == 3) || (args[0] == "resume" && len(args) == 2):
		conn, err := connectAs(ctx, dsn, "outbox_projector")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if args[0] == "pause" {
			err = pgcall.PauseDestinationClaims(ctx, conn, args[1], args[2])
			if err == nil {
				hook(projectionAfterPause)
			}
		} else {
			err = pgcall.ResumeDestinationClaims(ctx, conn, args[1])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%sd claims of %s\n", args[0], args[1])
		return nil
	case args[0] == "cutover" && len(args) == 7:
		v, err1 := strconv.Atoi(args[3])
		sv, err2 := strconv.Atoi(args[4])
		if err1 != nil || err2 != nil {
			return errUsage
		}
		conn, err := connectAs(ctx, dsn, "outbox_projector")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		r, err := pgcall.CutoverProjection(ctx, conn, args[1], args[2], pgcall.Quartet{DeliverySetVersion: v,
			DefinitionSchemaVersion: sv, DigestAlgorithmVersion: args[5], DefinitionDigest: args[6]})
		if err != nil {
			return err
		}
		hook(projectionAfterCutover)
		printCutover(out, r)
		return nil
	case args[0] == "rollback" && len(args) == 7:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		sv, err1 := strconv.Atoi(args[3])
		sch, err2 := strconv.Atoi(args[4])
		if err1 != nil || err2 != nil {
			return errUsage
		}
		return runRollback(ctx, dsn, args[1], v, pgcall.Quartet{DeliverySetVersion: sv,
			DefinitionSchemaVersion: sch, DigestAlgorithmVersion: args[5], DefinitionDigest: args[6]}, out)
	case (args[0] == "proof" || args[0] == "boundary") && len(args) == 2:
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var doc []byte
		if args[0] == "proof" {
			doc, err = pgcall.ReadReadinessProof(ctx, conn, args[1])
		} else {
			doc, err = pgcall.ReadCutoverBoundary(ctx, conn, args[1])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", doc)
		return nil
	case (args[0] == "retire" || args[0] == "drop") && len(args) == 3:
		v, err := version(args[2])
		if err != nil {
			return err
		}
		conn, err := connectAs(ctx, dsn, "outbox_registrar")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if args[0] == "retire" {
			if err := pgcall.RetireProjectionVersion(ctx, conn, args[1], v); err != nil {
				return err
			}
			fmt.Fprintf(out, "retired %s@%d\n", args[1], v)
			return nil
		}
		n, err := pgcall.DropRetiredProjection(ctx, conn, args[1], v)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "dropped %d rows of %s@%d\n", n, args[1], v)
		return nil
	}
	return errUsage
}

func printCutover(out io.Writer, r pgcall.CutoverResult) {
	fmt.Fprintf(out, "%s proof %s %s\n", r.Result, r.ProofID, r.ProofSHA256)
	for _, reason := range r.Reasons {
		fmt.Fprintf(out, "  blocked by %s\n", reason)
	}
}

// errRollbackBlocked: the rollback's cutover wrote a Blocked readiness proof (nothing else
// changed); the operator fixes the reasons and calls cutover with the printed build and token,
// or runs rollback again.
var errRollbackBlocked = errors.New("rollback blocked: the readiness proof names the reasons; nothing else changed")

// runRollback rolls projectionName back to its frozen former version by the cutover protocol in
// the other direction (SPEC R-PV-3, docs/projection-versions.md runbook step 6): a rollback build
// of the frozen version (outbox.start_shadow_build), its sources handed out until none is left
// (its receipts exist already: dual-apply kept it current), the freeze, the hand-out of the
// boundary members the build still lacks (until an empty batch), and cutover_projection to the delivery
// set q whose members target that version. Each call commits on its own; a crash between them
// leaves the old pointer in place (the cutover is one transaction), and running rollback again
// starts a new build, which abandons the half-done one (its token dies, OB001).
func runRollback(ctx context.Context, dsn, name string, version int, q pgcall.Quartet, out io.Writer) error {
	aud, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer aud.Close(ctx)
	vs, err := pgcall.ConsoleProjectionVersions(ctx, aud, 1000)
	if err != nil {
		return err
	}
	state := ""
	for _, r := range vs {
		if r.ProjectionName == name && r.ProjectionVersion == version {
			state = r.State
		}
	}
	if state != "frozen" {
		if state == "" {
			state = "not registered"
		}
		return fmt.Errorf("rollback: %s@%d is %s; only the frozen former version is a rollback target (a shadow is cut over with build/freeze/cutover)", name, version, state)
	}
	conn, err := connectAs(ctx, dsn, "outbox_projector")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	b, err := pgcall.StartShadowBuild(ctx, conn, name, version)
	if err != nil {
		return fmt.Errorf("rollback build: %w", err)
	}
	hook(projectionAfterBuild)
	fmt.Fprintf(out, "rollback build %s of %s@%d\n", b.BuildID, name, version)
	handOut := func(token string) (int, error) {
		n := 0
		for {
			batch, err := pgcall.ClaimRebuildSources(ctx, conn, b.BuildID, token, 1000)
			if err != nil {
				return n, fmt.Errorf("rollback hand-out: %w", err)
			}
			if len(batch) == 0 {
				return n, nil
			}
			n += len(batch)
		}
	}
	n, err := handOut(b.BuildToken)
	if err != nil {
		return err
	}
	fz, err := pgcall.FreezeCutoverCandidate(ctx, conn, b.BuildID, b.BuildToken)
	if err != nil {
		return fmt.Errorf("rollback freeze: %w", err)
	}
	hook(projectionAfterFreeze)
	late, err := handOut(fz.BuildToken)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "boundary %s %s (%d sources handed out)\ntoken %s\n", fz.BoundaryID, fz.BoundarySHA256, n+late, fz.BuildToken)
	r, err := pgcall.CutoverProjection(ctx, conn, b.BuildID, fz.BuildToken, q)
	if err != nil {
		return fmt.Errorf("rollback cutover: %w", err)
	}
	hook(projectionAfterCutover)
	printCutover(out, r)
	if r.Result != pgcall.CutoverSwitched {
		return errRollbackBlocked
	}
	return nil
}

// progressBar draws built / (built + remaining) in 30 cells.
func progressBar(built, remaining int64) string {
	const width = 30
	total := built + remaining
	n := width
	if total > 0 {
		n = int(built * width / total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
