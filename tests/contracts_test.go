package tests

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
)

var updateGoldens = flag.Bool("update-goldens", false, "rewrite contracts/golden from the documents defined in contracts_test.go")

const contractsDir = "../contracts"

// goldenDoc is one published contract example: the document, the schema it follows, and the
// name of its own digest field with the fields its digest candidate leaves out.
type goldenDoc struct {
	name, schema string
	doc          map[string]any
	digestField  string
	excluded     []string
}

func receiptGolden(name, typ, prefix, timeField string, extra map[string]any) goldenDoc {
	d := map[string]any{
		prefix + "Ref":                        "receipt-" + name,
		prefix + "SchemaVersion":              1,
		prefix + "DigestAlgorithmVersion":     "jcs-sha256-v1",
		"destination":                         extra["destination"],
		"consumerName":                        extra["consumerName"],
		"eventId":                             "0b7c2f52-3c1e-4c55-9d5e-8f2f1b7a9c01",
		"eventEnvelopeDigestAlgorithmVersion": "jcs-sha256-v1",
		"eventEnvelopeSha256":                 goldenEnvelopeDigest,
		timeField:                             "2026-12-01T08:00:00.123456Z",
	}
	for k, v := range extra {
		d[k] = v
	}
	return goldenDoc{name: "receipt." + name, schema: typ + "@1", doc: d, digestField: prefix + "Digest",
		excluded: []string{prefix + "Ref", prefix + "Digest", timeField}}
}

// goldenEnvelopeDigest is the digest of the envelope golden; TestContractGoldens checks it.
const goldenEnvelopeDigest = "648796d793a6f1b4c95d03f56fd81143a6ea99cd34eb4a045767a2e03bb2b3da"

func goldenDocs(t *testing.T) []goldenDoc {
	var def map[string]any
	if err := json.Unmarshal(mustReference(t), &def); err != nil {
		t.Fatal(err)
	}
	delete(def, "deliverySetDefinitionDigest")
	envelope := map[string]any{
		"eventId": "0b7c2f52-3c1e-4c55-9d5e-8f2f1b7a9c01", "eventType": "run.created@2.0", "eventSchemaVersion": "2.0",
		"aggregateId": "run-0001", "aggregateRevision": 1,
		"tenant":        map[string]any{"tenantKind": "organization", "tenantId": "acme", "workspaceId": "ws-1", "projectId": "prj-1"},
		"correlationId": "corr-42", "operationId": "op-42", "occurredAt": "2026-12-01T07:59:59.000001Z",
		"payload": map[string]any{"runId": "run-0001", "model": "π-large", "quota": "12.50", "steps": 3, "labels": []any{"β", "\u00e9t\u00e9", "\U0001F600"}},
	}
	ops := receiptGolden("operations-projection", "OperationsProjectionAppliedReceipt", "operationsProjectionAppliedReceipt", "appliedAt",
		map[string]any{"destination": "core_operations", "consumerName": "operations_projector", "projectionName": "operations_timeline",
			"projectionVersion": 1, "eventType": "run.created@2.0", "eventSchemaVersion": "2.0"})
	return []goldenDoc{
		{name: "delivery-set-definition.oceanway-v1", schema: "DeliverySetDefinition@1", doc: def,
			digestField: "deliverySetDefinitionDigest", excluded: []string{"deliverySetDefinitionDigest"}},
		{name: "event-envelope.run-created", schema: "EventEnvelope@1", doc: envelope},
		ops,
		receiptGolden("metering-input-processor", "MeteringInputProcessorConsumerReceipt", "meteringInputProcessorConsumerReceipt", "committedAt",
			map[string]any{"destination": "metering_input_processor", "consumerName": "metering_input_processor_consumer"}),
		receiptGolden("billing-finalization-coordinator", "BillingFinalizationCoordinatorConsumerReceipt", "billingFinalizationCoordinatorConsumerReceipt", "committedAt",
			map[string]any{"destination": "billing_finalization_coordinator", "consumerName": "billing_finalization_coordinator_consumer"}),
		receiptGolden("billing-settlement-catch-up", "BillingSettlementCatchUpConsumerReceipt", "billingSettlementCatchUpConsumerReceipt", "committedAt",
			map[string]any{"destination": "billing_settlement_catch_up", "consumerName": "billing_settlement_catch_up_consumer"}),
		receiptGolden("broker-publication", "BrokerPublicationReceipt", "brokerPublicationReceipt", "publishedAt",
			map[string]any{"destination": "events.jetstream", "consumerName": "jetstream", "stream": "OUTBOX", "sequence": 42, "duplicate": false}),
		{name: "active-consumer-ack.operations-projection", schema: "ActiveConsumerAck@1", doc: map[string]any{
			"destination": "core_operations", "consumerName": "operations_projector",
			"eventId": "0b7c2f52-3c1e-4c55-9d5e-8f2f1b7a9c01", "eventEnvelopeDigestAlgorithmVersion": "jcs-sha256-v1",
			"eventEnvelopeSha256": goldenEnvelopeDigest,
			"appliedReceipt": map[string]any{"kind": "operations_projection",
				"operationsProjectionAppliedReceiptRef":                    "receipt-operations-projection",
				"operationsProjectionAppliedReceiptSchemaVersion":          1,
				"operationsProjectionAppliedReceiptDigestAlgorithmVersion": "jcs-sha256-v1",
				"operationsProjectionAppliedReceiptDigest":                 "", // filled from the receipt golden
			}}},
	}
}

func mustReference(t *testing.T) []byte {
	t.Helper()
	b, err := reference.LoadRelease()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func candidateDigest(t *testing.T, doc map[string]any, excluded []string) string {
	t.Helper()
	c := map[string]any{}
	for k, v := range doc {
		c[k] = v
	}
	for _, k := range excluded {
		delete(c, k)
	}
	d, err := canon.Digest(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Seed 000 (published contracts), D-2, T-6: every golden document's canonical bytes and digest
// are reproduced byte for byte by the Go and the SQL canonicalizer; embedded digests equal the
// jcs-sha256-v1 of their candidates; each document follows its JSON Schema. Run with
// -update-goldens to rewrite contracts/golden after a deliberate contract change.
func TestContractGoldens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	docs := goldenDocs(t)
	// Fill embedded digests in dependency order (the ack refers to the operations receipt).
	var opsReceiptDigest string
	for i := range docs {
		d := &docs[i]
		if d.digestField != "" {
			d.doc[d.digestField] = candidateDigest(t, d.doc, d.excluded)
			if d.name == "receipt.operations-projection" {
				opsReceiptDigest = d.doc[d.digestField].(string)
			}
		}
		if d.name == "active-consumer-ack.operations-projection" {
			d.doc["appliedReceipt"].(map[string]any)["operationsProjectionAppliedReceiptDigest"] = opsReceiptDigest
		}
	}
	envDigest, err := canon.Digest(docs[1].doc)
	if err != nil {
		t.Fatal(err)
	}
	if envDigest != goldenEnvelopeDigest && !*updateGoldens {
		t.Fatalf("envelope golden digest is %s; update goldenEnvelopeDigest (and run -update-goldens)", envDigest)
	}
	conn := testdb.Conn(t, testdb.URL(t), "outbox_auditor")
	for _, d := range docs {
		dir := filepath.Join(contractsDir, "golden", d.name)
		pretty, err := json.MarshalIndent(d.doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		canonical, err := canon.Canonicalize(pretty)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		digest, _ := canon.SHA256Hex(canonical)
		if *updateGoldens {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			must(t, os.WriteFile(filepath.Join(dir, "document.json"), append(pretty, '\n'), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "canonical.json"), canonical, 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "sha256.txt"), []byte(digest+"\n"), 0o644))
		}
		raw, err := os.ReadFile(filepath.Join(dir, "document.json"))
		if err != nil {
			t.Fatalf("%s: %v (run go test ./tests -run TestContractGoldens -update-goldens)", d.name, err)
		}
		wantCanon, _ := os.ReadFile(filepath.Join(dir, "canonical.json"))
		wantSHA, _ := os.ReadFile(filepath.Join(dir, "sha256.txt"))
		goCanon, err := canon.Canonicalize(raw)
		if err != nil {
			t.Fatalf("%s: Go canonicalizer: %v", d.name, err)
		}
		var sqlCanon, sqlSHA string
		if err := conn.QueryRow(ctx, `SELECT outbox.jcs_canonicalize($1::json), outbox.jcs_sha256($1::json)`, string(raw)).Scan(&sqlCanon, &sqlSHA); err != nil {
			t.Fatalf("%s: SQL canonicalizer: %v", d.name, err)
		}
		if string(goCanon) != string(wantCanon) || sqlCanon != string(wantCanon) {
			t.Errorf("%s: canonical bytes differ:\n go  %s\n sql %s\n want %s", d.name, goCanon, sqlCanon, wantCanon)
		}
		if strings.TrimSpace(string(wantSHA)) != sqlSHA || sqlSHA != digest {
			t.Errorf("%s: digest %s (sql) vs golden %s vs computed %s", d.name, sqlSHA, strings.TrimSpace(string(wantSHA)), digest)
		}
		var parsed map[string]any
		must(t, json.Unmarshal(raw, &parsed))
		if d.digestField != "" {
			if got := candidateDigest(t, parsed, d.excluded); parsed[d.digestField] != got {
				t.Errorf("%s: embedded %s %v, candidate digest %s", d.name, d.digestField, parsed[d.digestField], got)
			}
		}
		schema := loadSchema(t, d.schema)
		if errs := validate(schema, parsed, "$"); len(errs) > 0 {
			t.Errorf("%s does not follow %s: %v", d.name, d.schema, errs)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func loadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(contractsDir, "schemas", name+".schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	must(t, json.Unmarshal(b, &s))
	return s
}

// validate checks v against the JSON Schema subset the contracts use (type, const, pattern,
// minLength, maxLength, minimum, maximum, properties, required, additionalProperties, items,
// oneOf). It exists so the goldens are checked against the published schemas in CI without a
// schema library; other languages validate with any draft 2020-12 validator.
func validate(s map[string]any, v any, path string) []string {
	var errs []string
	fail := func(f string, a ...any) { errs = append(errs, path+": "+fmt.Sprintf(f, a...)) }
	if c, ok := s["const"]; ok {
		cj, _ := json.Marshal(c)
		vj, _ := json.Marshal(v)
		if string(cj) != string(vj) {
			fail("want const %s, got %s", cj, vj)
		}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if len(validate(a.(map[string]any), v, path)) == 0 {
				n++
			}
		}
		if n != 1 {
			fail("matches %d of the oneOf branches, want exactly 1", n)
		}
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("not an object")
			return errs
		}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := m[r.(string)]; !ok {
				fail("missing required %s", r)
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(ps, m[k], path+"."+k)...)
			} else if s["additionalProperties"] == false {
				fail("unknown property %s", k)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("not an array")
			return errs
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range a {
				errs = append(errs, validate(items, x, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("not a string")
			return errs
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(str))) < n {
			fail("shorter than %v", n)
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len([]rune(str))) > n {
			fail("longer than %v", n)
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			fail("not an integer")
			return errs
		}
		if n, ok := s["minimum"].(float64); ok && f < n {
			fail("below minimum %v", n)
		}
		if n, ok := s["maximum"].(float64); ok && f > n {
			fail("above maximum %v", n)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("not a boolean")
		}
	}
	return errs
}
