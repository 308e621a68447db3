// Package receipt builds and checks the consumer receipt documents of SPEC R-AK-1a and the
// ActiveConsumerAck@1 that refers to them (R-AK-1).
//
// A receipt of kind K with field prefix P carries P+"Ref", P+"SchemaVersion",
// P+"DigestAlgorithmVersion", P+"Digest", the event's identity and digest, a time field and
// exactly the kind's registered members (Members; Build refuses anything else). Its digest is
// jcs-sha256-v1 of the document minus P+"Ref", P+"Digest" and the time field. Documents are
// returned as canonical (RFC 8785) bytes, so the same receipt always yields the same ack bytes;
// the database verifies every digest.
//
// The members, the ack's exact shape and the hot path: docs/contract.md#package-receipt.
package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
)

// Kind is a receipt kind: the closed union of ActiveConsumerAck@1.appliedReceipt.
type Kind string

// The receipt kinds of the reference release and of broker destinations (outbox.receipt_kinds).
const (
	OperationsProjection           Kind = "operations_projection"
	MeteringInputProcessor         Kind = "metering_input_processor"
	BillingFinalizationCoordinator Kind = "billing_finalization_coordinator"
	BillingSettlementCatchUp       Kind = "billing_settlement_catch_up"
	BrokerPublication              Kind = "broker_publication"
)

// DigestAlgorithm is the digest algorithm of receipts and envelopes.
const DigestAlgorithm = canon.Algorithm

// TimeLayout is the layout of the time field: UTC RFC 3339 with exactly six fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Info describes one kind (a row of outbox.receipt_kinds).
type Info struct {
	Kind          Kind
	ReceiptType   string
	Prefix        string
	TimeField     string
	SchemaVersion int
}

// Field names of a receipt relative to its prefix.
func (i Info) RefField() string           { return i.Prefix + "Ref" }
func (i Info) SchemaVersionField() string { return i.Prefix + "SchemaVersion" }
func (i Info) AlgorithmField() string     { return i.Prefix + "DigestAlgorithmVersion" }
func (i Info) DigestField() string        { return i.Prefix + "Digest" }

var kinds = []Info{
	{OperationsProjection, "OperationsProjectionAppliedReceipt", "operationsProjectionAppliedReceipt", "appliedAt", 1},
	{MeteringInputProcessor, "MeteringInputProcessorConsumerReceipt", "meteringInputProcessorConsumerReceipt", "committedAt", 1},
	{BillingFinalizationCoordinator, "BillingFinalizationCoordinatorConsumerReceipt", "billingFinalizationCoordinatorConsumerReceipt", "committedAt", 1},
	{BillingSettlementCatchUp, "BillingSettlementCatchUpConsumerReceipt", "billingSettlementCatchUpConsumerReceipt", "committedAt", 1},
	{BrokerPublication, "BrokerPublicationReceipt", "brokerPublicationReceipt", "publishedAt", 1},
}

// Lookup returns the description of kind k.
func Lookup(k Kind) (Info, bool) {
	for _, i := range kinds {
		if i.Kind == k {
			return i, true
		}
	}
	return Info{}, false
}

// ByType returns the kind whose receipt type is receiptType (e.g. "OperationsProjectionAppliedReceipt").
func ByType(receiptType string) (Info, bool) {
	for _, i := range kinds {
		if i.ReceiptType == receiptType {
			return i, true
		}
	}
	return Info{}, false
}

// Kinds lists every known kind.
func Kinds() []Info { return append([]Info(nil), kinds...) }

// JSON types of kind-specific members (outbox.receipt_kind_members.json_type).
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
)

// Member is a kind-specific receipt member: a row of outbox.receipt_kind_members.
type Member struct {
	Name     string
	JSONType string // TypeString, TypeInteger or TypeBoolean
	Required bool
}

// projectionMembers are the optional members every consumer kind but operations_projection may
// carry: the projection it builds and the event's type (SPEC R-AK-1a, migration 009).
var projectionMembers = []Member{
	{"eventSchemaVersion", TypeString, false}, {"eventType", TypeString, false},
	{"projectionName", TypeString, false}, {"projectionVersion", TypeInteger, false},
}

// members mirrors outbox.receipt_kind_members (seeded by migration 009); a test compares them.
var members = map[Kind][]Member{
	OperationsProjection: {
		{"eventSchemaVersion", TypeString, true}, {"eventType", TypeString, true},
		{"projectionName", TypeString, true}, {"projectionOutcome", TypeString, false},
		{"projectionVersion", TypeInteger, true},
	},
	MeteringInputProcessor:         append([]Member{{"consumerOutcome", TypeString, false}}, projectionMembers...),
	BillingFinalizationCoordinator: append([]Member{{"consumerOutcome", TypeString, false}}, projectionMembers...),
	BillingSettlementCatchUp:       append([]Member{{"consumerOutcome", TypeString, false}}, projectionMembers...),
	BrokerPublication: {
		{"duplicate", TypeBoolean, true}, {"sequence", TypeInteger, true}, {"stream", TypeString, true},
	},
}

// Members returns the kind-specific members of kind k, sorted by name (nil for an unknown kind).
func Members(k Kind) []Member { return append([]Member(nil), members[k]...) }

func memberOf(k Kind, name string) (Member, bool) {
	for _, m := range members[k] {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Errors of this package; match with errors.Is.
var (
	ErrInvalid        = errors.New("receipt invalid")
	ErrDigestMismatch = errors.New("receipt digest mismatch")
	ErrAckMismatch    = errors.New("ack does not match receipt")
)

// Fields are a kind's own receipt fields (all covered by the digest). Values must marshal to
// JSON inside the jcs-sha256-v1 subset: integers |n| <= 2^53-1, no floats (decimal strings).
type Fields map[string]any

// BrokerFields are the fields of a broker_publication receipt, from the broker's publish ack.
func BrokerFields(stream string, sequence uint64, duplicate bool) Fields {
	return Fields{"stream": stream, "sequence": sequence, "duplicate": duplicate}
}

// Params are the common fields of a receipt.
type Params struct {
	// Ref is the consumer's repository-owned reference; DefaultRef when empty.
	Ref                 string
	Destination         string
	ConsumerName        string
	EventID             string
	EventEnvelopeSHA256 string
	// ProjectionName/Version: required for operations_projection, empty otherwise.
	ProjectionName    string
	ProjectionVersion int
	// EventType/EventSchemaVersion: required for operations_projection, optional otherwise.
	EventType          string
	EventSchemaVersion string
	// Time is the time field (appliedAt/committedAt/publishedAt); now when zero.
	Time time.Time
	// Fields are the kind's own fields.
	Fields Fields
}

// Document is a complete receipt with its ack, both as canonical bytes.
type Document struct {
	Kind    Kind
	Ref     string
	Digest  string
	Receipt json.RawMessage
	Ack     json.RawMessage
	// Candidate is the canonical text of the digest candidate (what DigestCandidate returns):
	// Digest is its SHA-256. Passed with Receipt to the database's hot path (SPEC D-2).
	Candidate json.RawMessage
}

// DefaultRef is the deterministic receipt ref used when a consumer gives none; the database
// (inbox._inbox_default_ref) assigns the same: "<consumer>:<eventId>", or
// "<consumer>:<projection>@<version>:<eventId>" for a projection consumer.
func DefaultRef(consumerName, projectionName string, projectionVersion int, eventID string) string {
	if projectionName == "" {
		return consumerName + ":" + eventID
	}
	return consumerName + ":" + projectionName + "@" + strconv.Itoa(projectionVersion) + ":" + eventID
}

// FormatTime renders t as a receipt time (UTC, six fractional digits, Z).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

var (
	literalRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]*$`)
	uuidRE    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	hexRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	timeRE    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$`)
)

// common names every kind's document reserves (besides its prefixed fields and time field).
var commonFields = []string{"destination", "consumerName", "eventId", "eventEnvelopeDigestAlgorithmVersion",
	"eventEnvelopeSha256", "projectionName", "projectionVersion", "eventType", "eventSchemaVersion"}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Build returns the complete receipt of kind (digest filled in) and its ActiveConsumerAck@1.
func Build(kind Kind, p Params) (Document, error) {
	info, ok := Lookup(kind)
	if !ok {
		return Document{}, invalid("unknown kind %q", kind)
	}
	switch {
	case !literalRE.MatchString(p.Destination):
		return Document{}, invalid("destination %q", p.Destination)
	case !literalRE.MatchString(p.ConsumerName):
		return Document{}, invalid("consumer name %q", p.ConsumerName)
	case !uuidRE.MatchString(p.EventID):
		return Document{}, invalid("event id %q", p.EventID)
	case !hexRE.MatchString(p.EventEnvelopeSHA256):
		return Document{}, invalid("event envelope digest %q", p.EventEnvelopeSHA256)
	}
	if (p.ProjectionName == "") != (p.ProjectionVersion == 0) || p.ProjectionVersion < 0 ||
		(p.ProjectionName != "" && !literalRE.MatchString(p.ProjectionName)) {
		return Document{}, invalid("projection %q version %d", p.ProjectionName, p.ProjectionVersion)
	}
	if kind == OperationsProjection && (p.ProjectionName == "" || p.EventType == "" || p.EventSchemaVersion == "") {
		return Document{}, invalid("operations_projection receipts need projection name/version and event type/schema")
	}
	doc := map[string]any{}
	for k, v := range p.Fields {
		doc[k] = v
	}
	for _, k := range append(commonFields, info.RefField(), info.SchemaVersionField(), info.AlgorithmField(),
		info.DigestField(), info.TimeField) {
		if _, clash := p.Fields[k]; clash {
			return Document{}, invalid("field %q is reserved", k)
		}
	}
	if kind == BrokerPublication {
		if err := checkBrokerFields(p.Fields); err != nil {
			return Document{}, err
		}
	}
	if err := checkMembers(info.Kind, p); err != nil {
		return Document{}, err
	}
	ref := p.Ref
	if ref == "" {
		ref = DefaultRef(p.ConsumerName, p.ProjectionName, p.ProjectionVersion, p.EventID)
	}
	if len(ref) > 200 {
		return Document{}, invalid("ref longer than 200 characters")
	}
	t := p.Time
	if t.IsZero() {
		t = time.Now()
	}
	doc["destination"] = p.Destination
	doc["consumerName"] = p.ConsumerName
	doc["eventId"] = p.EventID
	doc["eventEnvelopeDigestAlgorithmVersion"] = DigestAlgorithm
	doc["eventEnvelopeSha256"] = p.EventEnvelopeSHA256
	if p.ProjectionName != "" {
		doc["projectionName"] = p.ProjectionName
		doc["projectionVersion"] = p.ProjectionVersion
	}
	if p.EventType != "" {
		doc["eventType"] = p.EventType
	}
	if p.EventSchemaVersion != "" {
		doc["eventSchemaVersion"] = p.EventSchemaVersion
	}
	doc[info.SchemaVersionField()] = info.SchemaVersion
	doc[info.AlgorithmField()] = DigestAlgorithm
	digest, err := canon.Digest(doc) // the candidate: no ref, no digest, no time yet
	if err != nil {
		return Document{}, invalid("candidate: %v", err)
	}
	doc[info.RefField()] = ref
	doc[info.TimeField] = FormatTime(t)
	doc[info.DigestField()] = digest
	raw, err := json.Marshal(doc)
	if err != nil {
		return Document{}, invalid("marshal: %v", err)
	}
	return Parse(raw)
}

// checkMembers enforces R-AK-1a: the kind's own fields and the members Build derives from p
// (projection, event type) are registered for the kind with their JSON type; required ones are
// present.
func checkMembers(k Kind, p Params) error {
	present := map[string]bool{}
	for name, v := range p.Fields {
		m, ok := memberOf(k, name)
		if !ok {
			return invalid("%s receipts carry no member %q (closed documents, outbox.receipt_kind_members)", k, name)
		}
		if !hasJSONType(v, m.JSONType) {
			return invalid("member %q must be a JSON %s", name, m.JSONType)
		}
		present[name] = true
	}
	derived := []struct {
		name string
		set  bool
	}{{"projectionName", p.ProjectionName != ""}, {"projectionVersion", p.ProjectionName != ""},
		{"eventType", p.EventType != ""}, {"eventSchemaVersion", p.EventSchemaVersion != ""}}
	for _, d := range derived {
		if !d.set {
			continue
		}
		if _, ok := memberOf(k, d.name); !ok {
			return invalid("%s receipts carry no member %q (closed documents, outbox.receipt_kind_members)", k, d.name)
		}
		present[d.name] = true
	}
	for _, m := range members[k] {
		if m.Required && !present[m.Name] {
			return invalid("%s receipts carry %s", k, m.Name)
		}
	}
	return nil
}

func hasJSONType(v any, jsonType string) bool {
	switch jsonType {
	case TypeString:
		_, ok := v.(string)
		return ok
	case TypeBoolean:
		_, ok := v.(bool)
		return ok
	case TypeInteger:
		switch v.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			return true
		}
	}
	return false
}

func checkBrokerFields(f Fields) error {
	if s, ok := f["stream"].(string); !ok || s == "" {
		return invalid("broker_publication receipts carry a stream")
	}
	switch f["sequence"].(type) {
	case int, int64, uint64, uint32, int32:
	default:
		return invalid("broker_publication receipts carry an integer sequence")
	}
	if _, ok := f["duplicate"].(bool); !ok {
		return invalid("broker_publication receipts carry a duplicate flag")
	}
	return nil
}

// Parse checks a complete receipt document (kind recognised by its field prefix, common fields,
// time field, digest recomputed) and returns it in canonical form with its ack.
func Parse(receipt []byte) (Document, error) {
	c, err := canon.Canonicalize(receipt)
	if err != nil {
		return Document{}, invalid("%v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c, &m); err != nil {
		return Document{}, invalid("not a JSON object")
	}
	info, err := kindOf(m)
	if err != nil {
		return Document{}, err
	}
	str := func(k string) (string, bool) {
		var s string
		v, ok := m[k]
		if !ok || json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	var ver int
	if v, ok := m[info.SchemaVersionField()]; !ok || json.Unmarshal(v, &ver) != nil || ver != info.SchemaVersion {
		return Document{}, invalid("%s must be %d", info.SchemaVersionField(), info.SchemaVersion)
	}
	if a, _ := str(info.AlgorithmField()); a != DigestAlgorithm {
		return Document{}, invalid("%s must be %s", info.AlgorithmField(), DigestAlgorithm)
	}
	if a, _ := str("eventEnvelopeDigestAlgorithmVersion"); a != DigestAlgorithm {
		return Document{}, invalid("eventEnvelopeDigestAlgorithmVersion must be %s", DigestAlgorithm)
	}
	ref, ok := str(info.RefField())
	if !ok || ref == "" || len(ref) > 200 {
		return Document{}, invalid("%s must be a non-empty string", info.RefField())
	}
	if ts, ok := str(info.TimeField); !ok || !timeRE.MatchString(ts) {
		return Document{}, invalid("%s must be a UTC time with six fractional digits", info.TimeField)
	} else if _, err := time.Parse(TimeLayout, ts); err != nil {
		return Document{}, invalid("%s: %v", info.TimeField, err)
	}
	for _, k := range []string{"destination", "consumerName"} {
		if s, _ := str(k); !literalRE.MatchString(s) {
			return Document{}, invalid("%s must be a literal", k)
		}
	}
	if s, _ := str("eventId"); !uuidRE.MatchString(s) {
		return Document{}, invalid("eventId must be a UUID")
	}
	if s, _ := str("eventEnvelopeSha256"); !hexRE.MatchString(s) {
		return Document{}, invalid("eventEnvelopeSha256 must be 64 lower-case hex digits")
	}
	if info.Kind == OperationsProjection {
		for _, k := range []string{"projectionName", "projectionVersion", "eventType", "eventSchemaVersion"} {
			if _, ok := m[k]; !ok {
				return Document{}, invalid("operations_projection receipts carry %s", k)
			}
		}
	}
	digest, ok := str(info.DigestField())
	if !ok || !hexRE.MatchString(digest) {
		return Document{}, invalid("%s must be 64 lower-case hex digits", info.DigestField())
	}
	cand, err := candidate(m, info)
	if err != nil {
		return Document{}, err
	}
	if want := canon.SumHex(cand); want != digest {
		return Document{}, fmt.Errorf("%w: %s is %s, jcs-sha256-v1 of the candidate is %s", ErrDigestMismatch, info.DigestField(), digest, want)
	}
	ack, err := ackOf(m, info)
	if err != nil {
		return Document{}, err
	}
	return Document{Kind: info.Kind, Ref: ref, Digest: digest, Receipt: c, Ack: ack, Candidate: cand}, nil
}

// VerifyDigest recomputes the digest of a complete receipt document and compares it with the
// document's own <prefix>Digest (ErrDigestMismatch). It returns the kind and the digest.
func VerifyDigest(receipt []byte) (Kind, string, error) {
	d, err := Parse(receipt)
	if err != nil {
		return "", "", err
	}
	return d.Kind, d.Digest, nil
}

// CheckAck verifies that ack is exactly the ActiveConsumerAck@1 of receipt (same canonical
// bytes): what a dispatcher checks before handing both to outbox.ack_delivery.
func CheckAck(ack, receipt []byte) error {
	d, err := Parse(receipt)
	if err != nil {
		return err
	}
	c, err := canon.Canonicalize(ack)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAckMismatch, err)
	}
	if !bytes.Equal(c, d.Ack) {
		return ErrAckMismatch
	}
	return nil
}

func kindOf(m map[string]json.RawMessage) (Info, error) {
	var found []Info
	for _, i := range kinds {
		for _, k := range []string{i.RefField(), i.SchemaVersionField(), i.AlgorithmField(), i.DigestField()} {
			if _, ok := m[k]; ok {
				found = append(found, i)
				break
			}
		}
	}
	if len(found) != 1 {
		names := make([]string, 0, len(found))
		for _, f := range found {
			names = append(names, string(f.Kind))
		}
		sort.Strings(names)
		return Info{}, invalid("cannot tell the receipt kind (fields of %d kinds: %v)", len(found), names)
	}
	return found[0], nil
}

// candidate returns the canonical text of the document m minus its ref, digest and time.
func candidate(m map[string]json.RawMessage, info Info) ([]byte, error) {
	cand := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		if k == info.RefField() || k == info.DigestField() || k == info.TimeField {
			continue
		}
		cand[k] = v
	}
	b, err := json.Marshal(cand)
	if err != nil {
		return nil, invalid("candidate: %v", err)
	}
	c, err := canon.Canonicalize(b)
	if err != nil {
		return nil, invalid("candidate: %v", err)
	}
	return c, nil
}

func ackOf(m map[string]json.RawMessage, info Info) (json.RawMessage, error) {
	applied := map[string]json.RawMessage{
		info.RefField():           m[info.RefField()],
		info.SchemaVersionField(): m[info.SchemaVersionField()],
		info.AlgorithmField():     m[info.AlgorithmField()],
		info.DigestField():        m[info.DigestField()],
	}
	k, _ := json.Marshal(string(info.Kind))
	applied["kind"] = k
	ap, err := json.Marshal(applied)
	if err != nil {
		return nil, invalid("ack: %v", err)
	}
	ack := map[string]json.RawMessage{
		"destination":                         m["destination"],
		"consumerName":                        m["consumerName"],
		"eventId":                             m["eventId"],
		"eventEnvelopeDigestAlgorithmVersion": m["eventEnvelopeDigestAlgorithmVersion"],
		"eventEnvelopeSha256":                 m["eventEnvelopeSha256"],
		"appliedReceipt":                      ap,
	}
	b, err := json.Marshal(ack)
	if err != nil {
		return nil, invalid("ack: %v", err)
	}
	return canon.Canonicalize(b)
}
