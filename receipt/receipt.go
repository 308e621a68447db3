// Package receipt builds and checks the consumer receipt documents of SPEC R-AK-1a and the
// ActiveConsumerAck@1 that refers to them (R-AK-1).
//
// A receipt of kind K with field prefix P carries P+"Ref", P+"SchemaVersion",
// P+"DigestAlgorithmVersion", P+"Digest", the event's identity and digest, a time field and
// exactly the kind's registered members (Build refuses anything else). Its digest is
// jcs-sha256-v1 of the document minus P+"Ref", P+"Digest" and the time field. Documents are
// returned as canonical (RFC 8785) bytes, so the same receipt always yields the same ack bytes;
// the database verifies every digest.
//
// The kinds and their members are not compiled into Go: they are rows of outbox.receipt_kinds and
// outbox.receipt_kind_members, read at start with LoadCatalog (SPEC §13); Build, Parse and the
// other operations are methods of the loaded Catalog.
//
// The members, the ack's exact shape and the hot path: docs/contract.md#package-receipt.
package receipt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Kind is a receipt kind: a row of outbox.receipt_kinds, the closed union of
// ActiveConsumerAck@1.appliedReceipt. Kinds are registered in the database; a Catalog loaded from
// it (LoadCatalog) is what knows them.
type Kind string

// BrokerPublication is the one receipt kind the kernel itself ships: the receipt the dispatcher's
// JetStream transport builds from a broker's publish ack. Its members come from the database like
// every other kind's.
const BrokerPublication Kind = "broker_publication"

// DigestAlgorithm is the digest algorithm of receipts and envelopes.
const DigestAlgorithm = canon.Algorithm

// TimeLayout is the layout of the time field: UTC RFC 3339 with exactly six fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Info describes one kind (a row of outbox.receipt_kinds with its outbox.receipt_kind_members).
type Info struct {
	Kind          Kind
	ReceiptType   string
	Prefix        string
	TimeField     string
	SchemaVersion int
	// RequiresProjection: a receipt of this kind names the projection (name and version) it was
	// applied to (outbox.receipt_kinds.requires_projection).
	RequiresProjection bool
	// Members are the kind-specific members, sorted by name.
	Members []Member
}

// Field names of a receipt relative to its prefix.
func (i Info) RefField() string           { return i.Prefix + "Ref" }
func (i Info) SchemaVersionField() string { return i.Prefix + "SchemaVersion" }
func (i Info) AlgorithmField() string     { return i.Prefix + "DigestAlgorithmVersion" }
func (i Info) DigestField() string        { return i.Prefix + "Digest" }

// JSON types of kind-specific members (outbox.receipt_kind_members.json_type).
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
)

// Member is a kind-specific receipt member: a row of outbox.receipt_kind_members.
type Member struct {
	Name     string `json:"member"`
	JSONType string `json:"json_type"` // TypeString, TypeInteger or TypeBoolean
	Required bool   `json:"required"`
	// Minimum bounds an integer member from below (nil: none).
	Minimum *int64 `json:"minimum,omitempty"`
	// MaxLength bounds a string member's length in characters (nil: none).
	MaxLength *int `json:"max_length,omitempty"`
}

// rules is one kind of a Catalog, with its members indexed.
type rules struct {
	Info
	members map[string]Member
}

// Catalog holds the receipt kinds of one database (outbox.receipt_kind_catalog) and builds and
// checks their receipts. Load it with LoadCatalog at start; a kind registered later is unknown
// to it until it is loaded again. A Catalog is immutable and safe for concurrent use; every
// lookup on the hot path is a map lookup.
type Catalog struct {
	kinds  []Info
	byKind map[Kind]*rules
	byType map[string]*rules
	// byField maps each kind's four prefixed fields (Ref, SchemaVersion, DigestAlgorithmVersion,
	// Digest) to the kind: how a document's kind is recognised.
	byField map[string]*rules
}

// NewCatalog returns a catalog of kinds (what LoadCatalog builds from the database rows; tests
// may build one by hand). Kinds, receipt types and prefixed field names must be unique and every
// member must have a known JSON type.
func NewCatalog(kinds []Info) (*Catalog, error) {
	c := &Catalog{byKind: map[Kind]*rules{}, byType: map[string]*rules{}, byField: map[string]*rules{}}
	for _, in := range kinds {
		in.Members = append([]Member(nil), in.Members...)
		sort.Slice(in.Members, func(a, b int) bool { return in.Members[a].Name < in.Members[b].Name })
		r := &rules{Info: in, members: make(map[string]Member, len(in.Members))}
		switch {
		case !literalRE.MatchString(string(in.Kind)) || in.ReceiptType == "" || in.Prefix == "" || in.TimeField == "" || in.SchemaVersion < 1:
			return nil, fmt.Errorf("receipt catalog: incomplete kind %+v", in)
		case c.byKind[in.Kind] != nil:
			return nil, fmt.Errorf("receipt catalog: kind %s twice", in.Kind)
		case c.byType[in.ReceiptType] != nil:
			return nil, fmt.Errorf("receipt catalog: receipt type %s twice", in.ReceiptType)
		}
		for _, m := range in.Members {
			switch m.JSONType {
			case TypeString, TypeInteger, TypeBoolean:
			default:
				return nil, fmt.Errorf("receipt catalog: kind %s member %s has JSON type %q", in.Kind, m.Name, m.JSONType)
			}
			if _, dup := r.members[m.Name]; dup || m.Name == "" {
				return nil, fmt.Errorf("receipt catalog: kind %s member %q twice or empty", in.Kind, m.Name)
			}
			r.members[m.Name] = m
		}
		for _, f := range []string{in.RefField(), in.SchemaVersionField(), in.AlgorithmField(), in.DigestField()} {
			if o := c.byField[f]; o != nil {
				return nil, fmt.Errorf("receipt catalog: field %s belongs to kinds %s and %s", f, o.Kind, in.Kind)
			}
			c.byField[f] = r
		}
		c.byKind[in.Kind], c.byType[in.ReceiptType] = r, r
		c.kinds = append(c.kinds, in)
	}
	sort.Slice(c.kinds, func(a, b int) bool { return c.kinds[a].Kind < c.kinds[b].Kind })
	return c, nil
}

// LoadCatalog reads every registered receipt kind with its members from the database
// (outbox.receipt_kind_catalog, SPEC §13: the kit reads kinds from the database, never from a
// list compiled into Go). db is a *pgx.Conn, a pgx.Tx or a *pgxpool.Pool whose role may execute
// the function (outbox_consumer, outbox_dispatcher, outbox_registrar, outbox_auditor).
func LoadCatalog(ctx context.Context, db pgcall.DBTX) (*Catalog, error) {
	rows, err := pgcall.ReceiptKindCatalog(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("receipt catalog: %w", err)
	}
	kinds := make([]Info, 0, len(rows))
	for _, r := range rows {
		in := Info{Kind: Kind(r.ReceiptKind), ReceiptType: r.ReceiptType, Prefix: r.FieldPrefix, TimeField: r.TimeField,
			SchemaVersion: r.ReceiptSchemaVersion, RequiresProjection: r.RequiresProjection}
		var ms []struct {
			Member
			MaxLengthCamel *int `json:"maxLength"`
		}
		if err := json.Unmarshal(r.Members, &ms); err != nil {
			return nil, fmt.Errorf("receipt catalog: members of %s: %w", r.ReceiptKind, err)
		}
		for _, m := range ms {
			if m.MaxLength == nil {
				m.MaxLength = m.MaxLengthCamel
			}
			in.Members = append(in.Members, m.Member)
		}
		kinds = append(kinds, in)
	}
	return NewCatalog(kinds)
}

// Lookup returns the description of kind k.
func (c *Catalog) Lookup(k Kind) (Info, bool) {
	if r := c.byKind[k]; r != nil {
		return r.Info.clone(), true
	}
	return Info{}, false
}

// clone returns i with its own copy of Members (a Catalog never shares its slices).
func (i Info) clone() Info {
	i.Members = append([]Member(nil), i.Members...)
	return i
}

// ByType returns the kind whose receipt type is receiptType (e.g. "BrokerPublicationReceipt").
func (c *Catalog) ByType(receiptType string) (Info, bool) {
	if r := c.byType[receiptType]; r != nil {
		return r.Info.clone(), true
	}
	return Info{}, false
}

// Kinds lists every kind of the catalog, sorted by name.
func (c *Catalog) Kinds() []Info {
	out := make([]Info, len(c.kinds))
	for i, in := range c.kinds {
		out[i] = in.clone()
	}
	return out
}

// Members returns the kind-specific members of kind k, sorted by name (nil for an unknown kind).
func (c *Catalog) Members(k Kind) []Member {
	if r := c.byKind[k]; r != nil {
		return append([]Member(nil), r.Members...)
	}
	return nil
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
	// ProjectionName/Version: required for a kind registered with requires_projection, empty otherwise.
	ProjectionName    string
	ProjectionVersion int
	// EventType/EventSchemaVersion: required when the kind's members require them, optional otherwise.
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
func (c *Catalog) Build(kind Kind, p Params) (Document, error) {
	r := c.byKind[kind]
	if r == nil {
		return Document{}, invalid("unknown kind %q (not in the loaded catalog)", kind)
	}
	info := r.Info
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
	if info.RequiresProjection && p.ProjectionName == "" {
		return Document{}, invalid("%s receipts need a projection name and version", kind)
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
	if err := r.checkMembers(p); err != nil {
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
	if d, ok := c.buildFast(r, doc, ref, FormatTime(t)); ok {
		return d, nil
	}
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
	return c.Parse(raw)
}

// checkMembers enforces R-AK-1a: the kind's own fields and the members Build derives from p
// (projection, event type) are registered for the kind with their JSON type and bounds; required
// ones are present.
func (r *rules) checkMembers(p Params) error {
	k := r.Kind
	present := make(map[string]bool, len(p.Fields)+4)
	for name, v := range p.Fields {
		m, ok := r.members[name]
		if !ok {
			return invalid("%s receipts carry no member %q (closed documents, outbox.receipt_kind_members)", k, name)
		}
		if err := m.check(v); err != nil {
			return err
		}
		present[name] = true
	}
	derived := []struct {
		name  string
		set   bool
		value any
	}{{"projectionName", p.ProjectionName != "", p.ProjectionName}, {"projectionVersion", p.ProjectionName != "", p.ProjectionVersion},
		{"eventType", p.EventType != "", p.EventType}, {"eventSchemaVersion", p.EventSchemaVersion != "", p.EventSchemaVersion}}
	for _, d := range derived {
		if !d.set {
			continue
		}
		m, ok := r.members[d.name]
		if !ok {
			return invalid("%s receipts carry no member %q (closed documents, outbox.receipt_kind_members)", k, d.name)
		}
		if err := m.check(d.value); err != nil {
			return err
		}
		present[d.name] = true
	}
	for _, m := range r.Members {
		if m.Required && !present[m.Name] {
			return invalid("%s receipts carry %s", k, m.Name)
		}
	}
	return nil
}

// check verifies v against the member's JSON type and bounds.
func (m Member) check(v any) error {
	if !hasJSONType(v, m.JSONType) {
		return invalid("member %q must be a JSON %s", m.Name, m.JSONType)
	}
	if m.Minimum != nil && m.JSONType == TypeInteger && belowMinimum(v, *m.Minimum) {
		return invalid("member %q must be at least %d", m.Name, *m.Minimum)
	}
	if m.MaxLength != nil && m.JSONType == TypeString && utf8.RuneCountInString(v.(string)) > *m.MaxLength {
		return invalid("member %q must be at most %d characters", m.Name, *m.MaxLength)
	}
	return nil
}

func belowMinimum(v any, minimum int64) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() < minimum
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return minimum > 0 && rv.Uint() < uint64(minimum)
	}
	return false
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

// Parse checks a complete receipt document (kind recognised by its field prefix, common fields,
// time field, digest recomputed) and returns it in canonical form with its ack.
func (c *Catalog) Parse(receipt []byte) (Document, error) {
	cb, err := canon.Canonicalize(receipt)
	if err != nil {
		return Document{}, invalid("%v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cb, &m); err != nil {
		return Document{}, invalid("not a JSON object")
	}
	r, err := c.kindOf(m)
	if err != nil {
		return Document{}, err
	}
	info := r.Info
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
	if info.RequiresProjection {
		for _, k := range []string{"projectionName", "projectionVersion"} {
			if _, ok := m[k]; !ok {
				return Document{}, invalid("%s receipts carry %s", info.Kind, k)
			}
		}
	}
	for _, mb := range info.Members {
		if _, ok := m[mb.Name]; mb.Required && !ok {
			return Document{}, invalid("%s receipts carry %s", info.Kind, mb.Name)
		}
	}
	digest, ok := str(info.DigestField())
	if !ok || !hexRE.MatchString(digest) {
		return Document{}, invalid("%s must be 64 lower-case hex digits", info.DigestField())
	}
	// cb is canonical: the candidate is cb with three members cut out, the ack is written from
	// the members' canonical values (no further canonicalization, issue 36 item 2).
	cand, err := candidateOf(cb, info)
	if err != nil {
		return Document{}, err
	}
	if want := canon.SumHex(cand); want != digest {
		return Document{}, fmt.Errorf("%w: %s is %s, jcs-sha256-v1 of the candidate is %s", ErrDigestMismatch, info.DigestField(), digest, want)
	}
	var ack json.RawMessage
	if asciiName(info.Prefix) && asciiName(string(info.Kind)) {
		vals := make(map[string][]byte, 8)
		for k, v := range m {
			vals[k] = v
		}
		ack = ackFromValues(vals, info)
	} else if ack, err = ackOf(m, info); err != nil {
		return Document{}, err
	}
	return Document{Kind: info.Kind, Ref: ref, Digest: digest, Receipt: cb, Ack: ack, Candidate: cand}, nil
}

// VerifyDigest recomputes the digest of a complete receipt document and compares it with the
// document's own <prefix>Digest (ErrDigestMismatch). It returns the kind and the digest.
func (c *Catalog) VerifyDigest(receipt []byte) (Kind, string, error) {
	d, err := c.Parse(receipt)
	if err != nil {
		return "", "", err
	}
	return d.Kind, d.Digest, nil
}

// CheckAck verifies that ack is exactly the ActiveConsumerAck@1 of receipt (same canonical
// bytes): what a dispatcher checks before handing both to outbox.ack_delivery.
func (c *Catalog) CheckAck(ack, receipt []byte) error {
	d, err := c.Parse(receipt)
	if err != nil {
		return err
	}
	ca, err := canon.Canonicalize(ack)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAckMismatch, err)
	}
	if !bytes.Equal(ca, d.Ack) {
		return ErrAckMismatch
	}
	return nil
}

// kindOf recognises a document's kind by its prefixed fields: exactly one kind's fields must be
// present.
func (c *Catalog) kindOf(m map[string]json.RawMessage) (*rules, error) {
	var found *rules
	var names []string
	for k := range m {
		r := c.byField[k]
		if r == nil || r == found {
			continue
		}
		if found == nil {
			found = r
			continue
		}
		if names == nil {
			names = []string{string(found.Kind)}
		}
		if !slices.Contains(names, string(r.Kind)) {
			names = append(names, string(r.Kind))
		}
	}
	if found == nil || names != nil {
		sort.Strings(names)
		return nil, invalid("cannot tell the receipt kind (fields of %d kinds of the loaded catalog: %v)", len(names), names)
	}
	return found, nil
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
