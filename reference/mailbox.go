package reference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/mailbox"
	"github.com/oceanway/pgoutbox/producer"
)

// The reference mailbox handler's outbound event (SPEC §10 "reference handler"): a destination
// with ordering per_aggregate receives it (RegisterMailboxDestination, ExtendReleaseWithMailbox).
const (
	MailboxEventType          = "mailbox.message-applied@1"
	MailboxEventSchemaVersion = "1"
)

// The outbound destination of the reference mailbox handler: ordering per_aggregate (SPEC
// R-CL-7), so the events of one key are delivered in revision order across retries and
// dispatcher restarts (R-MX-10). It reuses the metering_input_processor receipt kind (any
// registered kind works).
const (
	MailboxDestination        = "mailbox_events"
	MailboxConsumerName       = "mailbox_events_consumer"
	MailboxDestinationReceipt = "MeteringInputProcessorConsumerReceipt"
	mailboxDestinationKind    = string(MeteringInputProcessorKind)
)

// MailboxHandler is the reference mailbox.Handler, the one cmd/mailboxpump and the demo run by
// default. It maps a message {key, type, data} to one business record per identity
// (refmailbox.apply_reference_effect) and one outbound event whose aggregate is key and whose
// revision is the key's processing sequence (SPEC R-MX-9, R-MX-10). The business identity is
// the jcs-sha256 digest of the message: an upstream resend of the same content under a new
// msg_id is a duplicate (R-MX-9) and produces no second record and no second event.
type MailboxHandler struct {
	TenantKind, TenantID, WorkspaceID string
	// Reject, when set, is the business rule: a non-empty answer rejects the message (DEAD).
	Reject func(key, typ string, data json.RawMessage) string
}

var _ mailbox.Handler = MailboxHandler{}

// NewMailboxHandler is the handler factory cmd/mailboxpump hands the pump
// (pump.Process): the reference handler with the outbound events' tenant.
func NewMailboxHandler(_ string, tenant producer.Tenant) mailbox.Handler {
	return MailboxHandler{TenantKind: tenant.TenantKind, TenantID: tenant.TenantID, WorkspaceID: tenant.WorkspaceID}
}

var literalRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]*$`)

type refMessage struct {
	Key  *string         `json:"key"`
	Type *string         `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Handle implements mailbox.Handler.
func (h MailboxHandler) Handle(ctx context.Context, tx pgx.Tx, source string, head *mailbox.Head) (mailbox.Result, error) {
	var m refMessage
	dec := json.NewDecoder(bytes.NewReader(head.Message))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return mailbox.Result{}, mailbox.Reject("malformed message: %s", shortErr(err))
	}
	switch {
	case m.Key == nil || *m.Key == "" || len(*m.Key) > 200:
		return mailbox.Result{}, mailbox.Reject("malformed message: key must be a string of 1..200 characters")
	case m.Type == nil || !literalRE.MatchString(*m.Type) || len(*m.Type) > 200:
		return mailbox.Result{}, mailbox.Reject("malformed message: type must match ^[a-z0-9][a-z0-9._@-]*$")
	case m.Data == nil:
		return mailbox.Result{}, mailbox.Reject("malformed message: data is missing")
	}
	identity, err := canon.SHA256Hex(head.Message)
	if err != nil {
		// Not canonicalizable (a float, a duplicate key, too deep): no event could carry it.
		return mailbox.Result{}, mailbox.Reject("malformed message: %s", shortErr(err))
	}
	if h.Reject != nil {
		if why := h.Reject(*m.Key, *m.Type, m.Data); why != "" {
			return mailbox.Result{}, mailbox.Reject("rejected by handler: %s", why)
		}
	}
	outcome, rev, err := ApplyReferenceEffect(ctx, tx, source, head.MsgID, head.LeaseToken, identity, *m.Key, *m.Type)
	if err != nil {
		return mailbox.Result{}, err
	}
	if outcome == EffectDuplicate {
		return mailbox.Result{Outcome: mailbox.Succeeded}, nil // one identity, one effective record (R-MX-9)
	}
	payload, err := json.Marshal(map[string]any{"source": source, "msgId": fmt.Sprint(head.MsgID), "type": *m.Type, "data": m.Data})
	if err != nil {
		return mailbox.Result{}, err
	}
	if _, err := producer.Append(ctx, tx, producer.Event{EventType: MailboxEventType, EventSchemaVersion: MailboxEventSchemaVersion,
		AggregateID: *m.Key, AggregateRevision: rev, Payload: payload,
		Tenant: producer.Tenant{TenantKind: h.TenantKind, TenantID: h.TenantID, WorkspaceID: h.WorkspaceID}}); err != nil {
		if errors.Is(err, producer.ErrNotCanonicalizable) || errors.Is(err, producer.ErrEnvelopeInvalid) {
			if pgcall.SQLState(err) == "" { // refused in Go, before the database saw it
				return mailbox.Result{}, mailbox.Reject("malformed message: %s", shortErr(err))
			}
			return mailbox.Result{}, mailbox.Reject("event refused: %s", pgcall.SQLState(err))
		}
		return mailbox.Result{}, err
	}
	return mailbox.Result{Outcome: mailbox.Succeeded}, nil
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// RegisterMailboxDestination registers the reference mailbox handler's destination
// (insert-or-compare, so calling it again is a no-op). Caller role: outbox_registrar.
func RegisterMailboxDestination(ctx context.Context, db pgcall.DBTX) error {
	return pgcall.RegisterDestination(ctx, db, pgcall.DestinationParams{
		Destination: MailboxDestination, ConsumerName: MailboxConsumerName,
		ReceiptKind: mailboxDestinationKind, ReceiptType: MailboxDestinationReceipt, ReceiptSchemaVersion: 1,
		Ordering: pgcall.OrderingPerAggregate,
	})
}

// ExtendReleaseWithMailbox returns base (a DeliverySetDefinition@1 with its digest) as a new
// version with the reference mailbox handler's event pair and its member for MailboxDestination
// added, sorted and counted as R-DS-1 requires, and the digest recomputed (R-DS-3). Register
// it, then activate it: every pair of base stays applicable.
func ExtendReleaseWithMailbox(base []byte, version int) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	delete(m, "deliverySetDefinitionDigest")
	m["deliverySetVersion"] = version
	apps, _ := m["applicableEvents"].([]any)
	members, _ := m["members"].([]any)
	if apps == nil || members == nil {
		return nil, errors.New("extend release: base has no applicableEvents/members")
	}
	for _, a := range apps {
		if a.(map[string]any)["eventType"] == MailboxEventType {
			return nil, errors.New("extend release: base already carries " + MailboxEventType)
		}
	}
	apps = append(apps, map[string]any{"eventType": MailboxEventType, "eventSchemaVersion": MailboxEventSchemaVersion})
	members = append(members, map[string]any{
		"eventType": MailboxEventType, "eventSchemaVersion": MailboxEventSchemaVersion, "destination": MailboxDestination,
		"consumerName": MailboxConsumerName, "expectedReceiptType": MailboxDestinationReceipt, "expectedReceiptSchemaVersion": 1,
		"projectionTarget": map[string]any{"state": "not_applicable"}, "mandatory": true,
	})
	str := func(x any, k string) string { return x.(map[string]any)[k].(string) }
	sort.Slice(apps, func(i, j int) bool {
		a, b := apps[i], apps[j]
		if str(a, "eventType") != str(b, "eventType") {
			return str(a, "eventType") < str(b, "eventType")
		}
		return str(a, "eventSchemaVersion") < str(b, "eventSchemaVersion")
	})
	key := func(x any) string {
		return str(x, "eventType") + "\x00" + str(x, "eventSchemaVersion") + "\x00" + str(x, "destination") + "\x00" + str(x, "consumerName")
	}
	sort.Slice(members, func(i, j int) bool { return key(members[i]) < key(members[j]) })
	m["applicableEvents"] = apps
	m["applicableEventCount"] = len(apps)
	m["members"] = members
	m["memberCount"] = len(members)
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return release.WithDigest(b) // the digest of the candidate, computed the one way (R-DS-3)
}
