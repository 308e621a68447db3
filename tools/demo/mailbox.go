package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

// runMailboxDemo runs the mailbox inbox pipeline (SPEC §10, docs/mailbox.md) on a small legacy
// mailbox in a database of its own: an out-of-order commit (id 4 after 5 and 6), a hole that is
// released (id 7), a late row committing inside it afterwards, and the outbound events waiting
// at a per_aggregate destination one per key. It prints what happened at each step.
func runMailboxDemo(ctx context.Context, server string) error {
	step("mailbox pipeline: a legacy mailbox in another database")
	ourURL, err := reference.FreshDatabase(ctx, server, "pgoutbox_demo_mailbox")
	if err != nil {
		return err
	}
	boxURL, err := freshPlainDatabase(ctx, server, "pgoutbox_demo_legacy_mailbox")
	if err != nil {
		return err
	}
	box, err := pgx.Connect(ctx, boxURL)
	if err != nil {
		return err
	}
	defer box.Close(ctx)
	if _, err := box.Exec(ctx, `CREATE TABLE mailbox (msg_id bigint PRIMARY KEY, received_at timestamptz,
		message jsonb NOT NULL, processed_at timestamptz)`); err != nil {
		return err
	}
	admin, err := pgx.Connect(ctx, ourURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	// The pump's role (a login user would be granted it): outbox_mailbox + outbox_producer.
	if err := ensureRole(ctx, admin, "pgoutbox_demo_mailbox_pump", "outbox_mailbox", "outbox_producer"); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, `SET ROLE outbox_registrar`); err != nil {
		return err
	}
	if err := pgcall.RegisterMailboxSource(ctx, admin, pgcall.MailboxSourceParams{Source: "legacy-inbox",
		HoleReleaseAfter: time.Second, BackfillDeadline: time.Hour}); err != nil {
		return err
	}
	if err := reference.RegisterMailboxDestination(ctx, admin); err != nil {
		return err
	}
	ref, err := reference.LoadRelease()
	if err != nil {
		return err
	}
	doc, err := reference.ExtendReleaseWithMailbox(ref, 2)
	if err != nil {
		return err
	}
	q, err := pgcall.RegisterDeliverySet(ctx, admin, doc, "oceanway-first-release+mailbox")
	if err != nil {
		return err
	}
	if err := pgcall.ActivateDeliverySet(ctx, admin, q); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, `RESET ROLE`); err != nil {
		return err
	}
	fmt.Printf("  our database %s, mailbox database %s\n", redact(ourURL), redact(boxURL))
	fmt.Printf("  source legacy-inbox (holes released after 1s); delivery set %d adds %s -> %s (ordering per_aggregate)\n",
		q.DeliverySetVersion, reference.MailboxEventType, reference.MailboxDestination)

	ins := func(db pgcall.DBTX, id int64, key string, n int) error {
		_, err := db.Exec(ctx, `INSERT INTO mailbox VALUES ($1, now(), $2::jsonb, NULL)`, id,
			fmt.Sprintf(`{"key":%q,"type":"flight.updated","data":{"n":%d}}`, key, n))
		return err
	}
	keys := []string{"", "CA981", "MU5101", "CA981", "MU5101", "CA981", "MU5101", "CA981", "CA981"}
	for _, id := range []int64{1, 2, 3} {
		if err := ins(box, id, keys[id], int(id)); err != nil {
			return err
		}
	}
	other, err := pgx.Connect(ctx, boxURL)
	if err != nil {
		return err
	}
	defer other.Close(ctx)
	slow, err := other.Begin(ctx) // id 4: its transaction commits after 5 and 6
	if err != nil {
		return err
	}
	if err := ins(slow, 4, keys[4], 4); err != nil {
		return err
	}
	for _, id := range []int64{5, 6, 8} { // 7 is missing for now
		if err := ins(box, id, keys[id], int(id)); err != nil {
			return err
		}
	}
	fmt.Println("  the other system committed 1 2 3 5 6 8; 4 is still in flight; 7 does not exist")

	pumpConn, err := pgx.Connect(ctx, ourURL)
	if err != nil {
		return err
	}
	defer pumpConn.Close(ctx)
	if _, err := pumpConn.Exec(ctx, `SET ROLE pgoutbox_demo_mailbox_pump`); err != nil {
		return err
	}
	boxPool, err := pgxpool.New(ctx, boxURL)
	if err != nil {
		return err
	}
	defer boxPool.Close()
	cfg := pump.Defaults()
	cfg.Source, cfg.Table = "legacy-inbox", "mailbox"
	p, err := pump.New(cfg, pumpConn, boxPool,
		reference.MailboxHandler{TenantKind: "organization", TenantID: "oceanway", WorkspaceID: "ops"}, nil, nil)
	if err != nil {
		return err
	}
	if err := p.Acquire(ctx); err != nil {
		return err
	}
	show := func(what string) error {
		if _, err := p.Tick(ctx); err != nil {
			return err
		}
		st, err := pgcall.GetPipelineStatus(ctx, admin, "legacy-inbox")
		if err != nil {
			return err
		}
		head := "-"
		if st.HeadMsgID != nil {
			head = fmt.Sprintf("%d (%s)", *st.HeadMsgID, *st.HeadState)
		}
		fmt.Printf("  %-44s W=%d  unfinished=%d  open hole ids=%d  released=%d  late=%d  head=%s\n",
			what, st.Watermark, st.LagIDs, st.OpenHoles, st.ReleasedHoles, st.LateRows, head)
		return nil
	}
	if err := show("tick: 1-3 processed, W stops at the hole 4"); err != nil {
		return err
	}
	if err := slow.Commit(ctx); err != nil {
		return err
	}
	if err := show("4 commits late: filled before release"); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond) // hole 7 ages past hole_release_after (our clock)
	if err := show("1s later: hole 7 released, W skips only 7"); err != nil {
		return err
	}
	if err := ins(box, 7, keys[7], 7); err != nil {
		return err
	}
	if err := show("7 commits inside the released hole"); err != nil {
		return err
	}
	if _, err := p.Tick(ctx); err != nil { // marks
		return err
	}

	rows, err := admin.Query(ctx, `SELECT m.msg_id, m.state, coalesce(e.key, ''), coalesce(e.revision, 0), m.backfill_state
		FROM mailbox.messages m LEFT JOIN refmailbox.ref_effects e ON e.source = m.source AND e.msg_id = m.msg_id ORDER BY m.msg_id`)
	if err != nil {
		return err
	}
	fmt.Println("  msg  state      key     revision  processed mark")
	for rows.Next() {
		var id, rev int64
		var state, key string
		var bf *string
		if err := rows.Scan(&id, &state, &key, &rev, &bf); err != nil {
			rows.Close()
			return err
		}
		mark := "-"
		if bf != nil {
			mark = *bf
		}
		fmt.Printf("  %3d  %-9s  %-6s  %8d  %s\n", id, state, key, rev, mark)
	}
	rows.Close()
	if rows.Err() != nil {
		return rows.Err()
	}
	var marked int
	if err := box.QueryRow(ctx, `SELECT count(*) FROM mailbox WHERE processed_at IS NOT NULL`).Scan(&marked); err != nil {
		return err
	}
	fmt.Printf("  mailbox rows marked processed: %d of 8 (the late row 7 is left to an operator)\n", marked)

	// Per-key order at the destination: only each key's lowest open revision is claimable.
	if _, err := admin.Exec(ctx, `SET ROLE outbox_dispatcher`); err != nil {
		return err
	}
	cs, err := pgcall.ClaimDeliveries(ctx, admin, pgcall.ClaimParams{Worker: "demo", Destinations: []string{reference.MailboxDestination}, BatchSize: 100, Lease: time.Minute})
	if err != nil {
		return err
	}
	fmt.Printf("  %s: claimable now (per_aggregate, one per key):", reference.MailboxDestination)
	for _, c := range cs {
		var env struct {
			AggregateID       string `json:"aggregateId"`
			AggregateRevision int64  `json:"aggregateRevision"`
		}
		_ = json.Unmarshal(c.EventEnvelope, &env)
		fmt.Printf("  %s rev %d", env.AggregateID, env.AggregateRevision)
	}
	fmt.Println()
	st := p.Stats()
	fmt.Printf("  pump: %d ticks, %d enqueued, %d succeeded, %d dead, %d marks written\n", st.Ticks, st.Discovered, st.Succeeded, st.Dead, st.Marked)
	ps, err := pgcall.GetPipelineStatus(ctx, pumpConn, "legacy-inbox")
	if err != nil {
		return err
	}
	if st.Succeeded != 7 || marked != 7 || ps.LateRows != 1 || ps.Watermark != 8 || len(cs) != 2 {
		return fmt.Errorf("mailbox pipeline: want 7 succeeded and marked, 1 late row, W=8 and 2 claimable heads; got %d, %d, %d, W=%d, %d",
			st.Succeeded, marked, ps.LateRows, ps.Watermark, len(cs))
	}
	fmt.Println("\nmailbox checks passed: id order kept across the late commit, only the hole id skipped, the late row reported, every processed row marked once.")
	return nil
}

// freshPlainDatabase (re)creates an empty database (the legacy system's) and returns its URL.
func freshPlainDatabase(ctx context.Context, server, name string) (string, error) {
	c, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+id+" TEMPLATE template0 ENCODING UTF8"); err != nil {
		return "", err
	}
	return migrate.WithDatabase(server, name), nil
}
