package mailbox

// Helpers of the mailbox pipeline tests (SPEC §10): TWO databases on the cluster - ours (the
// kernel, migrated) and the legacy system's mailbox database with a mailbox table - a writer
// that plays the other system with real transactions committing out of order, and a pump
// running as a role holding outbox_mailbox + outbox_producer. Prefixed mbx.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/peterldowns/pgtestdb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	mailboxapi "github.com/oceanway/pgoutbox/mailbox"
	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

const (
	mbxSource   = "legacy-inbox"
	mbxTable    = "legacy.mailbox"
	mbxPumpRole = "outbox_test_mailbox_pump" // NOLOGIN, member of outbox_mailbox and outbox_producer
)

// mbxBoxMigrator builds the mailbox database's template: the legacy table as the other system
// has it (msg_id, received_at, message, processed_at), in a schema of its own.
type mbxBoxMigrator struct{}

func (mbxBoxMigrator) Hash() (string, error) { return "legacy-mailbox-v1", nil }

func (mbxBoxMigrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	_, err := db.ExecContext(ctx, `CREATE SCHEMA legacy;
		CREATE TABLE legacy.mailbox (msg_id bigint PRIMARY KEY, received_at timestamptz NULL,
		                             message jsonb NOT NULL, processed_at timestamptz NULL)`)
	return err
}

type mbx struct {
	t       *testing.T
	ourDSN  string
	boxDSN  string
	admin   *pgx.Conn     // superuser on our database: fixtures and assertions only
	box     *pgx.Conn     // superuser on the mailbox database: the other system
	boxPool *pgxpool.Pool // what the pump uses to read and mark the mailbox
	api     *pgx.Conn     // our database as outbox_mailbox: direct SQL API calls
}

var mbxRoleOnce sync.Once

type mbxOpts struct {
	holeReleaseAfter, backfillDeadline time.Duration
	backoffBase, backoffCap            time.Duration
	maxAttempts                        int
	startAfter                         int64
}

// mbxSetup creates both databases, registers the source (as outbox_registrar) and returns the
// bundle. Holes age by test control (mbxAgeHoles), never by sleeping.
func mbxSetup(t *testing.T, o mbxOpts) *mbx {
	t.Helper()
	if o.holeReleaseAfter == 0 {
		o.holeReleaseAfter = time.Hour
	}
	if o.backfillDeadline == 0 {
		o.backfillDeadline = time.Hour
	}
	ctx := context.Background()
	ourDSN := testdb.URL(t)
	boxDSN := pgtestdb.Custom(t, testdb.Config(t), mbxBoxMigrator{}).URL()
	b := &mbx{t: t, ourDSN: ourDSN, boxDSN: boxDSN, admin: testdb.Conn(t, ourDSN, ""), box: testdb.Conn(t, boxDSN, ""),
		boxPool: testdb.Pool(t, boxDSN)}
	mbxRoleOnce.Do(func() {
		if _, err := b.admin.Exec(ctx, `DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_test_mailbox_pump') THEN
				CREATE ROLE outbox_test_mailbox_pump NOLOGIN;
			END IF;
			GRANT outbox_mailbox, outbox_producer TO outbox_test_mailbox_pump;
			EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
			t.Fatalf("pump role: %v", err)
		}
	})
	reg := testdb.Conn(t, ourDSN, "outbox_registrar")
	if err := pgcall.RegisterMailboxSource(ctx, reg, pgcall.MailboxSourceParams{Source: mbxSource,
		HoleReleaseAfter: o.holeReleaseAfter, BackfillDeadline: o.backfillDeadline, StartAfter: o.startAfter,
		HeadBackoffBase: o.backoffBase, HeadBackoffCap: o.backoffCap, MaxAttempts: o.maxAttempts}); err != nil {
		t.Fatalf("register source: %v", err)
	}
	b.api = testdb.Conn(t, ourDSN, "outbox_mailbox")
	return b
}

// mbxActivate registers the reference handler's destination (ordering per_aggregate) and
// activates the reference release extended with its event pair as delivery set 2.
func (b *mbx) activate() {
	t := b.t
	t.Helper()
	ctx := context.Background()
	reg := testdb.Conn(t, b.ourDSN, "outbox_registrar")
	if err := reference.RegisterMailboxDestination(ctx, reg); err != nil {
		t.Fatalf("register destination: %v", err)
	}
	doc, err := reference.ExtendReleaseWithMailbox(testfix.ReferenceRelease(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgcall.RegisterDeliverySet(ctx, reg, doc, "mailbox-test")
	if err != nil {
		t.Fatalf("register delivery set: %v", err)
	}
	if err := pgcall.ActivateDeliverySet(ctx, reg, q); err != nil {
		t.Fatalf("activate: %v", err)
	}
}

// write inserts mailbox rows as the other system, committed at once. message may be any JSON.
func (b *mbx) write(id int64, message string) {
	b.t.Helper()
	if _, err := b.box.Exec(context.Background(), `INSERT INTO legacy.mailbox (msg_id, received_at, message) VALUES ($1, now(), $2::jsonb)`, id, message); err != nil {
		b.t.Fatalf("mailbox insert %d: %v", id, err)
	}
}

// openWrite starts a transaction of the other system that inserts id and stays open: a smaller
// id becoming visible after larger ones. Commit or roll back the returned transaction.
func (b *mbx) openWrite(id int64, message string) pgx.Tx {
	b.t.Helper()
	ctx := context.Background()
	c := testdb.Conn(b.t, b.boxDSN, "")
	tx, err := c.Begin(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO legacy.mailbox (msg_id, received_at, message) VALUES ($1, now(), $2::jsonb)`, id, message); err != nil {
		b.t.Fatalf("mailbox insert %d: %v", id, err)
	}
	return tx
}

func mbxMsg(key, typ string, data any) string {
	d, _ := json.Marshal(data)
	return fmt.Sprintf(`{"key":%q,"type":%q,"data":%s}`, key, typ, d)
}

// rows reads the mailbox as the pump does (msg_id > after), for direct record_discovery calls.
func (b *mbx) rows(after int64) []pgcall.MailboxRow {
	b.t.Helper()
	rs, err := b.box.Query(context.Background(), `SELECT msg_id, received_at, message::text FROM legacy.mailbox WHERE msg_id > $1 ORDER BY msg_id`, after)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rs.Close()
	var out []pgcall.MailboxRow
	for rs.Next() {
		var r pgcall.MailboxRow
		var m string
		if err := rs.Scan(&r.MsgID, &r.ReceivedAt, &m); err != nil {
			b.t.Fatal(err)
		}
		r.Message = []byte(m)
		out = append(out, r)
	}
	return out
}

func (b *mbx) discover(db pgcall.DBTX, rows []pgcall.MailboxRow) pgcall.DiscoveryResult {
	b.t.Helper()
	r, err := pgcall.RecordDiscovery(context.Background(), db, mbxSource, rows)
	if err != nil {
		b.t.Fatalf("record discovery: %v", err)
	}
	return r
}

func (b *mbx) status() pgcall.PipelineStatus {
	b.t.Helper()
	s, err := pgcall.GetPipelineStatus(context.Background(), b.admin, mbxSource)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// states returns msg_id → state of our processing rows.
func (b *mbx) states() map[int64]string {
	b.t.Helper()
	rs, err := b.admin.Query(context.Background(), `SELECT msg_id, state FROM mailbox.messages WHERE source = $1`, mbxSource)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64]string{}
	for rs.Next() {
		var id int64
		var s string
		_ = rs.Scan(&id, &s)
		out[id] = s
	}
	return out
}

func (b *mbx) int(conn *pgx.Conn, q string, args ...any) int64 {
	b.t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		b.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// ageHoles moves the first-seen time of every open hole back by d (the test's clock control:
// "older than hole_release_after" without sleeping).
func (b *mbx) ageHoles(d time.Duration) {
	b.t.Helper()
	if _, err := b.admin.Exec(context.Background(), `UPDATE mailbox.holes SET first_seen_at = first_seen_at - $2::interval
		WHERE source = $1 AND released_at IS NULL`, mbxSource, fmt.Sprintf("%d microseconds", d.Microseconds())); err != nil {
		b.t.Fatal(err)
	}
}

// pump builds a pump on a session of its own (role outbox_test_mailbox_pump).
func (b *mbx) pump(h mailboxapi.Handler, mut ...func(*pump.Config)) (*pump.Pump, *pgx.Conn, *pump.Metrics) {
	b.t.Helper()
	cfg := pump.Defaults()
	cfg.Source, cfg.Table, cfg.Worker = mbxSource, mbxTable, "test-pump"
	cfg.PollInterval, cfg.StatusInterval = 20*time.Millisecond, 20*time.Millisecond
	cfg.Lease = 30 * time.Second
	for _, f := range mut {
		f(&cfg)
	}
	conn := testdb.Conn(b.t, b.ourDSN, mbxPumpRole)
	if h == nil {
		h = mbxRefHandler(nil)
	}
	m := pump.NewMetrics(mbxSource)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(&dispatcherfix.LogWriter{T: b.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := pump.New(cfg, conn, b.boxPool, h, m, log)
	if err != nil {
		b.t.Fatal(err)
	}
	return p, conn, m
}

func mbxRefHandler(reject func(key, typ string, data json.RawMessage) string) reference.MailboxHandler {
	return reference.MailboxHandler{TenantKind: "organization", TenantID: "tenant-1", WorkspaceID: "workspace-1", Reject: reject}
}

// tick runs one pump round and fails the test on error.
func mbxTick(t *testing.T, p *pump.Pump) {
	t.Helper()
	if _, err := p.Tick(context.Background()); err != nil {
		t.Fatalf("tick: %v", err)
	}
}

// claimAs claims the head on db (nil when none is due).
func (b *mbx) claim(db pgcall.DBTX) *pgcall.Head {
	b.t.Helper()
	h, err := pgcall.ClaimHead(context.Background(), db, mbxSource, "test-worker", 30*time.Second)
	if err != nil {
		b.t.Fatalf("claim head: %v", err)
	}
	return h
}

// gaugeValue reads one source's gauge.
func gaugeValue(t *testing.T, g *prometheus.GaugeVec, source string) float64 {
	t.Helper()
	return testutil.ToFloat64(g.WithLabelValues(source))
}
