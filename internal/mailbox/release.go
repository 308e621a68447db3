package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
)

// The outbound destination of the reference handler: ordering per_aggregate (SPEC R-CL-7), so
// the events of one key are delivered in revision order across retries and dispatcher restarts
// (R-MX-10). It reuses the metering_input_processor receipt kind (any registered kind works).
const (
	Destination         = "mailbox_events"
	ConsumerName        = "mailbox_events_consumer"
	DestinationReceipt  = "MeteringInputProcessorConsumerReceipt"
	destinationKind     = "metering_input_processor"
	destinationOrdering = pgcall.OrderingPerAggregate
)

// RegisterReferenceDestination registers the reference handler's destination (insert-or-compare,
// so calling it again is a no-op). Caller role: outbox_registrar.
func RegisterReferenceDestination(ctx context.Context, db pgcall.DBTX) error {
	return pgcall.RegisterDestination(ctx, db, pgcall.DestinationParams{Destination: Destination, ConsumerName: ConsumerName,
		ReceiptKind: destinationKind, ReceiptType: DestinationReceipt, ReceiptSchemaVersion: 1, Ordering: destinationOrdering})
}

// ExtendRelease returns base (a DeliverySetDefinition@1 with its digest) as a new version with
// the reference handler's event pair and its member for Destination added, sorted and counted
// as R-DS-1 requires, and the digest recomputed (R-DS-3). Register it, then activate it: every
// pair of base stays applicable.
func ExtendRelease(base []byte, version int) (json.RawMessage, error) {
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
		if a.(map[string]any)["eventType"] == EventType {
			return nil, errors.New("extend release: base already carries " + EventType)
		}
	}
	apps = append(apps, map[string]any{"eventType": EventType, "eventSchemaVersion": EventSchemaVersion})
	members = append(members, map[string]any{
		"eventType": EventType, "eventSchemaVersion": EventSchemaVersion, "destination": Destination,
		"consumerName": ConsumerName, "expectedReceiptType": DestinationReceipt, "expectedReceiptSchemaVersion": 1,
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
