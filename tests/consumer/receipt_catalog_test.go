package consumer

// SPEC §13, R-AK-1a (issue 34 item 3): the Go receipt kit reads receipt kinds from the database,
// never from a list compiled into Go. A kind registered after a catalog was loaded is unknown to
// that catalog until it is loaded again; a kit started after the registration builds receipts of
// the kind, and the SQL record path (the kit's inbox.record_receipt) and ack path
// (outbox.ack_delivery) accept them.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

const rcKind receipt.Kind = "rc_widget_store"

const (
	rcType        = "RcWidgetStoredReceipt"
	rcPrefix      = "rcWidgetStoredReceipt"
	rcDestination = "rc_widgets"
	rcConsumer    = "rc_widget_sink"
)

// rcRegisterKind registers rcKind as outbox_owner (the registry's writer; the registration
// function lands with another migration): a time field of its own, a required string member and
// an optional integer member with a minimum.
func rcRegisterKind(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	testfix.Must(t, pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_owner`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox.receipt_kinds
		        (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection)
		        VALUES ($1, $2, $3, 'storedAt', 1, false)`, string(rcKind), rcType, rcPrefix); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required, minimum)
		        VALUES ($1, 'shelf', 'string', true, NULL), ($1, 'count', 'integer', false, 1)`, string(rcKind))
		return err
	}))
}

// rcExtendRelease returns the reference release as version 2 with one more member: run.created
// routed to rcDestination, expecting an rcType receipt.
func rcExtendRelease(t *testing.T) json.RawMessage {
	t.Helper()
	base, err := reference.LoadRelease()
	testfix.Must(t, err)
	var m map[string]any
	testfix.Must(t, json.Unmarshal(base, &m))
	delete(m, "deliverySetDefinitionDigest")
	m["deliverySetVersion"] = 2
	members := append(m["members"].([]any), map[string]any{
		"eventType": kernelfix.RunCreated, "eventSchemaVersion": "2.0", "destination": rcDestination,
		"consumerName": rcConsumer, "expectedReceiptType": rcType, "expectedReceiptSchemaVersion": 1,
		"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	key := func(x any) string {
		s := x.(map[string]any)
		return s["eventType"].(string) + "\x00" + s["eventSchemaVersion"].(string) + "\x00" + s["destination"].(string) + "\x00" + s["consumerName"].(string)
	}
	sort.Slice(members, func(i, j int) bool { return key(members[i]) < key(members[j]) })
	m["members"], m["memberCount"] = members, len(members)
	raw, err := json.Marshal(m)
	testfix.Must(t, err)
	doc, err := release.WithDigest(raw)
	testfix.Must(t, err)
	return doc
}

// SPEC §13, R-AK-1a: a stale catalog refuses the new kind (Build, DigestCandidate, a kit's start);
// a reloaded one and a kit started after the registration serve it; the SQL record and ack paths
// accept the kit's receipt.
func TestReceiptKindRegisteredAtRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	cons := testdb.Conn(t, b.Dsn, "outbox_consumer")
	reg := testdb.Conn(t, b.Dsn, "outbox_registrar")
	pool := testdb.Pool(t, b.Dsn)

	stale, err := receipt.LoadCatalog(ctx, cons)
	testfix.Must(t, err)
	rcRegisterKind(t, b.Admin)

	// The catalog loaded before the registration does not know the kind.
	eventID := testfix.NewUUID()
	params := receipt.Params{Destination: rcDestination, ConsumerName: rcConsumer, EventID: eventID,
		EventEnvelopeSHA256: strings.Repeat("ab", 32), Fields: receipt.Fields{"shelf": "a1"}}
	if _, ok := stale.Lookup(rcKind); ok {
		t.Fatal("a catalog loaded before the registration knows the kind")
	}
	if _, err := stale.Build(rcKind, params); !errors.Is(err, receipt.ErrInvalid) {
		t.Fatalf("stale catalog Build: %v, want ErrInvalid", err)
	}

	// Reloaded: known, with the registered rules (Go enforces them too).
	fresh, err := receipt.LoadCatalog(ctx, cons)
	testfix.Must(t, err)
	info, ok := fresh.Lookup(rcKind)
	one := int64(1)
	wantMembers, _ := json.Marshal([]receipt.Member{{Name: "count", JSONType: receipt.TypeInteger, Minimum: &one},
		{Name: "shelf", JSONType: receipt.TypeString, Required: true}})
	gotMembers, _ := json.Marshal(info.Members)
	if !ok || info.ReceiptType != rcType || info.Prefix != rcPrefix || info.TimeField != "storedAt" || info.SchemaVersion != 1 ||
		info.RequiresProjection || string(gotMembers) != string(wantMembers) {
		t.Fatalf("reloaded catalog: %+v %s", info, gotMembers)
	}
	if len(fresh.Kinds()) != len(stale.Kinds())+1 {
		t.Fatalf("reloaded catalog has %d kinds, the stale one %d", len(fresh.Kinds()), len(stale.Kinds()))
	}
	doc, err := fresh.Build(rcKind, params)
	testfix.Must(t, err)
	if k, _, err := stale.DigestCandidate(doc.Receipt); err == nil {
		t.Fatalf("stale catalog told the kind of a %s receipt: %s", rcKind, k)
	}
	for name, f := range map[string]receipt.Fields{"below minimum": {"shelf": "a", "count": 0}, "missing required": {"count": 2},
		"unregistered member": {"shelf": "a", "colour": "red"}} {
		p := params
		p.Fields = f
		if _, err := fresh.Build(rcKind, p); !errors.Is(err, receipt.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}

	// A destination of the kind, routed in an active delivery set.
	testfix.Must(t, pgcall.RegisterDestination(ctx, reg, pgcall.DestinationParams{Destination: rcDestination,
		ConsumerName: rcConsumer, ReceiptKind: string(rcKind), ReceiptType: rcType, ReceiptSchemaVersion: 1}))
	q, err := pgcall.RegisterDeliverySet(ctx, reg, rcExtendRelease(t), "oceanway-first-release")
	testfix.Must(t, err)
	testfix.Must(t, pgcall.ActivateDeliverySet(ctx, reg, q))

	// A kit configured with the stale catalog refuses the kind; one started now loads the
	// catalog itself (as its role, a member of outbox_consumer) and serves it.
	cfg := consumer.Config{Pool: pool, Destination: rcDestination, ConsumerName: rcConsumer, ReceiptKind: rcKind,
		SupportedEvents: []consumer.EventKey{{EventType: kernelfix.RunCreated, SchemaVersion: "2.0"}},
		Apply: func(context.Context, pgx.Tx, consumer.Event) (consumer.ReceiptFields, error) {
			return consumer.ReceiptFields{"shelf": "b7", "count": 3}, nil
		},
		Role: "outbox_consumer", InsecureNoAuth: true, Catalog: stale}
	if _, err := consumer.New(ctx, cfg); err == nil {
		t.Fatal("a kit with a catalog that lacks its kind started")
	}
	cfg.Catalog = nil
	kit, err := consumer.New(ctx, cfg)
	testfix.Must(t, err)

	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "agg-rc", 1)
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, time.Minute, rcDestination)
	d, code := dispatcher.Verify(c)
	if code != "" {
		t.Fatalf("verify: %s", code)
	}
	res := consumerfix.Deliver(t, kit, d)
	if res.Status != wire.Acknowledged {
		t.Fatalf("kit answered %s %s (%s)", res.Status, res.Code, res.Ref)
	}
	got, err := fresh.Parse(res.Receipt)
	testfix.Must(t, err)
	testfix.Must(t, fresh.CheckAck(res.Ack, res.Receipt))
	var stored string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT receipt_kind FROM inbox.inbox_receipts WHERE consumer_name = $1 AND event_id = $2::uuid`,
		rcConsumer, c.EventID).Scan(&stored))
	if got.Kind != rcKind || stored != string(rcKind) {
		t.Fatalf("receipt kind %s, stored %s", got.Kind, stored)
	}
	// The producer's ack path, with the digest candidate the dispatcher computes (D-2 hot path).
	k, cand, err := fresh.DigestCandidate(res.Receipt)
	if err != nil || k != rcKind {
		t.Fatalf("digest candidate: %s %v", k, err)
	}
	outcome, err := pgcall.AckDelivery(ctx, b.Disp, kernelfix.FenceOf(c), res.Ack, res.Receipt, string(cand))
	if err != nil || outcome != "not_complete" { // acknowledged; core_operations still owes run.created

		t.Fatalf("ack_delivery of a %s receipt: %q %v", rcKind, outcome, err)
	}
	if st := kernelfix.Status(t, b.Admin, rcDestination, c.EventID); st != "acknowledged" {
		t.Fatalf("delivery %s, want acknowledged", st)
	}
}
