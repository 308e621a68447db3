// Package audit renders the kernel's grant matrix and trigger list as stable, diff-able text
// (SPEC R-SEC-4). `outboxctl audit` prints it; a test compares it with a committed golden file.
package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Write prints the grant matrix and the trigger list of the database behind db.
func Write(ctx context.Context, db pgcall.DBTX, out io.Writer) error {
	var buf bytes.Buffer
	if err := write(ctx, db, &buf); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(out, strings.Join(lines, "\n")+"\n")
	return err
}

func write(ctx context.Context, db pgcall.DBTX, out io.Writer) error {
	grants, err := pgcall.GrantMatrix(ctx, db)
	if err != nil {
		return err
	}
	triggers, err := pgcall.Triggers(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "# grant matrix: effective privileges of each kernel role and PUBLIC")
	tw := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	for _, g := range grants {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Kind, g.Object, g.Role, g.Privs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "# triggers")
	tw = tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	for _, t := range triggers {
		def := ""
		if t.Deferrable {
			def = "DEFERRABLE"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\n", t.Table, t.Name, t.Timing, t.Events, t.Level, t.Function, def)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bindings, err := pgcall.ConsumerBindings(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "# consumer bindings (inbox.consumer_roles): members of the role may act as the consumer, nobody else")
	if len(bindings) == 0 {
		fmt.Fprintln(out, "(none: every inbox call by a non-superuser is refused until the registrar binds its consumer name)")
		return nil
	}
	tw = tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	for _, b := range bindings {
		fmt.Fprintf(tw, "%s\t%s\tbound by %s\n", b.ConsumerName, b.Role, b.BoundBy)
	}
	return tw.Flush()
}
