package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/receipt"
)

// refEnvelope and parseEnvelopeReference are the decoder parseEnvelope replaced (three passes:
// a map for nulls, the tenant's map, a strict struct decode), kept as the reference it must agree
// with.
type refEnvelope struct {
	EventID            *string         `json:"eventId"`
	EventType          *string         `json:"eventType"`
	EventSchemaVersion *string         `json:"eventSchemaVersion"`
	AggregateID        *string         `json:"aggregateId"`
	AggregateRevision  *int64          `json:"aggregateRevision"`
	Tenant             *Tenant         `json:"tenant"`
	CorrelationID      *string         `json:"correlationId"`
	CausationID        *string         `json:"causationId"`
	OperationID        *string         `json:"operationId"`
	OccurredAt         *string         `json:"occurredAt"`
	Payload            json.RawMessage `json:"payload"`
}

func parseEnvelopeReference(canonical []byte) (Event, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &top); err != nil {
		return Event{}, err
	}
	for _, v := range top {
		if string(v) == "null" {
			return Event{}, errors.New("null envelope field")
		}
	}
	if t, ok := top["tenant"]; ok {
		var tenant map[string]json.RawMessage
		if err := json.Unmarshal(t, &tenant); err != nil {
			return Event{}, err
		}
		for _, v := range tenant {
			if string(v) == "null" {
				return Event{}, errors.New("null tenant field")
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	var e refEnvelope
	if err := dec.Decode(&e); err != nil {
		return Event{}, err
	}
	if e.EventID == nil || !uuidRE.MatchString(*e.EventID) || e.EventType == nil || *e.EventType == "" ||
		e.EventSchemaVersion == nil || *e.EventSchemaVersion == "" || e.AggregateID == nil || *e.AggregateID == "" ||
		e.AggregateRevision == nil || *e.AggregateRevision <= 0 || e.Tenant == nil || e.Tenant.TenantKind == "" ||
		e.Tenant.TenantID == "" || e.Tenant.WorkspaceID == "" || e.OccurredAt == nil || len(e.Payload) == 0 {
		return Event{}, errors.New("missing or invalid envelope field")
	}
	at, err := time.Parse(receipt.TimeLayout, *e.OccurredAt)
	if err != nil {
		return Event{}, err
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return Event{EventID: *e.EventID, EventType: *e.EventType, EventSchemaVersion: *e.EventSchemaVersion,
		AggregateID: *e.AggregateID, AggregateRevision: *e.AggregateRevision, Tenant: *e.Tenant,
		CorrelationID: s(e.CorrelationID), CausationID: s(e.CausationID), OperationID: s(e.OperationID),
		OccurredAt: at, Payload: e.Payload}, nil
}

// The one-pass decoder accepts exactly what the three-pass one accepted, with the same Event, on
// valid envelopes (optional members, escapes, payload shapes) and on each kind of invalid one.
func TestParseEnvelopeAgreesWithReference(t *testing.T) {
	t.Parallel()
	base := map[string]any{
		"eventId": "0b8f3c7e-5d0a-4c1e-9a55-6f0e2f1d9a01", "eventType": "run.created@2.0", "eventSchemaVersion": "2.0",
		"aggregateId": "agg-1", "aggregateRevision": 3, "occurredAt": "2026-01-02T03:04:05.000006Z",
		"tenant":  map[string]any{"tenantKind": "org", "tenantId": "t1", "workspaceId": "w1"},
		"payload": map[string]any{"a": 1},
	}
	variants := map[string]func(m map[string]any){
		"valid":           func(map[string]any) {},
		"optional ids":    func(m map[string]any) { m["correlationId"], m["causationId"], m["operationId"] = "c", "d", "e" },
		"escaped strings": func(m map[string]any) { m["aggregateId"], m["correlationId"] = "a\"b\\c\nd\u00e9\u2028", "<&>" },
		"project id": func(m map[string]any) {
			m["tenant"] = map[string]any{"tenantKind": "org", "tenantId": "t", "workspaceId": "w", "projectId": "p"}
		},
		"payload array":  func(m map[string]any) { m["payload"] = []any{1, "x"} },
		"payload number": func(m map[string]any) { m["payload"] = 7 },
		"unknown member": func(m map[string]any) { m["extra"] = 1 },
		"null optional":  func(m map[string]any) { m["correlationId"] = nil },
		"null payload":   func(m map[string]any) { m["payload"] = nil },
		"null tenant member": func(m map[string]any) {
			m["tenant"] = map[string]any{"tenantKind": "org", "tenantId": "t", "workspaceId": "w", "projectId": nil}
		},
		"unknown tenant": func(m map[string]any) {
			m["tenant"] = map[string]any{"tenantKind": "org", "tenantId": "t", "workspaceId": "w", "x": "y"}
		},
		"tenant not object": func(m map[string]any) { m["tenant"] = "org" },
		"tenant empty id": func(m map[string]any) {
			m["tenant"] = map[string]any{"tenantKind": "org", "tenantId": "", "workspaceId": "w"}
		},
		"revision zero":     func(m map[string]any) { m["aggregateRevision"] = 0 },
		"revision negative": func(m map[string]any) { m["aggregateRevision"] = -1 },
		"revision float":    func(m map[string]any) { m["aggregateRevision"] = 1.5 },
		"revision string":   func(m map[string]any) { m["aggregateRevision"] = "1" },
		"event id upper":    func(m map[string]any) { m["eventId"] = strings.ToUpper("0b8f3c7e-5d0a-4c1e-9a55-6f0e2f1d9a01") },
		"event id number":   func(m map[string]any) { m["eventId"] = 5 },
		"type empty":        func(m map[string]any) { m["eventType"] = "" },
		"type number":       func(m map[string]any) { m["eventType"] = 1 },
		"bad time":          func(m map[string]any) { m["occurredAt"] = "2026-01-02T03:04:05Z" },
		"time number":       func(m map[string]any) { m["occurredAt"] = 1 },
	}
	for _, drop := range []string{"eventId", "eventType", "eventSchemaVersion", "aggregateId", "aggregateRevision", "tenant", "occurredAt", "payload"} {
		drop := drop
		variants["without "+drop] = func(m map[string]any) { delete(m, drop) }
	}
	for name, v := range variants {
		m := map[string]any{}
		for k, x := range base {
			m[k] = x
		}
		v(m)
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, gotErr := parseEnvelope(raw)
		want, wantErr := parseEnvelopeReference(raw)
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: one pass %+v (%v), reference %+v (%v)", name, got, gotErr, want, wantErr)
		}
		if name == "valid" && gotErr != nil {
			t.Fatalf("valid envelope refused: %v", gotErr)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{`, `{"eventId":"a","eventId":"b"}`} {
		_, gotErr := parseEnvelope([]byte(bad))
		_, wantErr := parseEnvelopeReference([]byte(bad))
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: one pass %v, reference %v", bad, gotErr, wantErr)
		}
	}
}
