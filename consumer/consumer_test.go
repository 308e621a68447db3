package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/wire"
)

// noDB fails the test if the kit ever opens a transaction.
type noDB struct{ t *testing.T }

func (n noDB) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	n.t.Error("the kit opened a transaction for a delivery it must refuse before the database")
	return nil, errors.New("no database")
}

// testCatalog is test data shaped like the database's receipt kinds (the kit loads the real ones
// through Pool when Config.Catalog is nil; tests/consumer covers that path).
func testCatalog(t *testing.T) *receipt.Catalog {
	t.Helper()
	consumerMembers := []receipt.Member{{Name: "consumerOutcome", JSONType: receipt.TypeString},
		{Name: "eventSchemaVersion", JSONType: receipt.TypeString}, {Name: "eventType", JSONType: receipt.TypeString},
		{Name: "projectionName", JSONType: receipt.TypeString}, {Name: "projectionVersion", JSONType: receipt.TypeInteger}}
	c, err := receipt.NewCatalog([]receipt.Info{
		{Kind: "billing_settlement_catch_up", ReceiptType: "BillingSettlementCatchUpConsumerReceipt", Prefix: "billingSettlementCatchUpConsumerReceipt",
			TimeField: "committedAt", SchemaVersion: 1, Members: consumerMembers},
		{Kind: "operations_projection", ReceiptType: "OperationsProjectionAppliedReceipt", Prefix: "operationsProjectionAppliedReceipt",
			TimeField: "appliedAt", SchemaVersion: 1, RequiresProjection: true, Members: []receipt.Member{
				{Name: "eventSchemaVersion", JSONType: receipt.TypeString, Required: true}, {Name: "eventType", JSONType: receipt.TypeString, Required: true},
				{Name: "projectionName", JSONType: receipt.TypeString, Required: true}, {Name: "projectionVersion", JSONType: receipt.TypeInteger, Required: true}}},
		{Kind: receipt.BrokerPublication, ReceiptType: "BrokerPublicationReceipt", Prefix: "brokerPublicationReceipt", TimeField: "publishedAt",
			SchemaVersion: 1, Members: []receipt.Member{{Name: "stream", JSONType: receipt.TypeString, Required: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testConfig(t *testing.T) Config {
	return Config{
		Pool: noDB{t}, Destination: "billing_settlement_catch_up", ConsumerName: "billing_settlement_catch_up_consumer",
		ReceiptKind: "billing_settlement_catch_up", Catalog: testCatalog(t),
		SupportedEvents: []EventKey{{"metering.settlement-input.current-changed@1", "1"}},
		Apply: func(context.Context, pgx.Tx, Event) (ReceiptFields, error) {
			t.Error("Apply called")
			return nil, nil
		},
		HMACSecret: []byte("secret-secret-secret-secret-secret"),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func testDelivery(t *testing.T, env map[string]any) wire.Delivery {
	raw, _ := json.Marshal(env)
	c, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	sha, _ := canon.SHA256Hex(c)
	return wire.Delivery{Destination: "billing_settlement_catch_up", ConsumerName: "billing_settlement_catch_up_consumer",
		EventID: env["eventId"].(string), Envelope: c, EnvelopeSHA256: sha, EnvelopeDigestAlgorithmVersion: canon.Algorithm,
		ExpectedReceiptType: "BillingSettlementCatchUpConsumerReceipt", ExpectedReceiptSchemaVersion: 1}
}

func testEnv() map[string]any {
	return map[string]any{
		"eventId": "0b8f3c7e-5d0a-4c1e-9a55-6f0e2f1d9a01", "eventType": "metering.settlement-input.current-changed@1",
		"eventSchemaVersion": "1", "aggregateId": "dim-1", "aggregateRevision": 1,
		"tenant":     map[string]any{"tenantKind": "organization", "tenantId": "t", "workspaceId": "w"},
		"occurredAt": "2026-01-01T00:00:00.000000Z", "payload": map[string]any{"a": "b"},
	}
}

// R-CO-4, D-2: everything decided before the transaction never touches the database.
func TestCheckBeforeDatabase(t *testing.T) {
	c, err := New(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit func(*wire.Delivery)
		env  func(map[string]any)
		want wire.Result
	}{
		"digest":         {func(d *wire.Delivery) { d.EnvelopeSHA256 = "00" + d.EnvelopeSHA256[2:] }, nil, nonRetryable(CodeDigestConflict, "")},
		"unknown type":   {nil, func(e map[string]any) { e["eventType"] = "run.created@2.0" }, nonRetryable(CodeUnknownEventType, "")},
		"schema":         {nil, func(e map[string]any) { e["eventSchemaVersion"] = "2" }, nonRetryable(CodeUnsupportedSchema, "")},
		"receipt":        {func(d *wire.Delivery) { d.ExpectedReceiptType = "OtherReceipt" }, nil, nonRetryable(CodeUnsupportedSchema, "")},
		"missing tenant": {nil, func(e map[string]any) { delete(e, "tenant") }, nonRetryable(CodeEnvelopeInvalid, "")},
		"null field":     {nil, func(e map[string]any) { e["correlationId"] = nil }, nonRetryable(CodeEnvelopeInvalid, "")},
		"misrouted":      {func(d *wire.Delivery) { d.ConsumerName = "x" }, nil, retryable(CodeConsumerUnavailable, "")},
	}
	for name, tc := range cases {
		env := testEnv()
		if tc.env != nil {
			tc.env(env)
		}
		d := testDelivery(t, env)
		if tc.edit != nil {
			tc.edit(&d)
		}
		r, err := c.Deliver(context.Background(), d)
		if err != nil || r.Status != tc.want.Status || r.Code != tc.want.Code {
			t.Errorf("%s: %s %s, want %s %s", name, r.Status, r.Code, tc.want.Status, tc.want.Code)
		}
	}
}

// R-PV-2, R-PV-3: a delivery for another version of the kit's projection (a cutover or rollback
// window) is retryable, never a reason to quarantine; another projection is unsupported_schema.
func TestProjectionVersionNotServedIsRetryable(t *testing.T) {
	cfg := testConfig(t)
	cfg.ProjectionName, cfg.ProjectionVersion = "operations_timeline", 1
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		version int
		want    wire.Result
	}{
		{"operations_timeline", 2, retryable(CodeConsumerUnavailable, "projection_version_not_served")},
		{"other_projection", 1, nonRetryable(CodeUnsupportedSchema, "projection_target")},
	} {
		d := testDelivery(t, testEnv())
		d.RequiredProjectionName, d.RequiredProjectionVersion = tc.name, tc.version
		r, err := c.Deliver(context.Background(), d)
		if err != nil || r.Status != tc.want.Status || r.Code != tc.want.Code || r.Ref != tc.want.Ref {
			t.Errorf("%s@%d: %s %s %s, want %s %s %s", tc.name, tc.version, r.Status, r.Code, r.Ref, tc.want.Status, tc.want.Code, tc.want.Ref)
		}
	}
}

// R-CO-5, R-DP-2: authentication fails closed; a bad signature is 401 before anything else.
func TestHTTPAuthentication(t *testing.T) {
	cfg := testConfig(t)
	c, _ := New(context.Background(), cfg)
	env := testEnv()
	env["eventType"] = "run.created@2.0" // refused before the DB if authenticated
	d := testDelivery(t, env)
	hdr := http.Header{}
	wire.SetHeaders(hdr, d)
	sign := func(secret []byte) string { return wire.SignRequest(secret, time.Now().Unix(), hdr, d.Envelope) }
	post := func(h http.Handler, sig, bearer string) int {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(d.Envelope))
		for k, v := range hdr {
			req.Header[k] = v
		}
		if sig != "" {
			req.Header.Set(wire.HeaderSignature, sig)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if s := post(c, "", ""); s != http.StatusUnauthorized {
		t.Errorf("no signature: %d", s)
	}
	if s := post(c, sign([]byte("wrong")), ""); s != http.StatusUnauthorized {
		t.Errorf("wrong signature: %d", s)
	}
	if s := post(c, wire.Sign(cfg.HMACSecret, d.Envelope), ""); s != http.StatusUnauthorized {
		t.Errorf("body-only signature without AcceptBodyOnlySignature: %d, want 401", s)
	}
	if s := post(c, sign(cfg.HMACSecret), ""); s != http.StatusUnprocessableEntity {
		t.Errorf("good signature: %d, want 422 unknown_event_type", s)
	}
	// A signature over another body digest than the one the request claims (the dispatcher's
	// body is always the canonical envelope of Pgoutbox-Event-Envelope-Sha256): it is checked
	// against the claimed digest before the body is read, so it never verifies (issue 26).
	if s := post(c, wire.SignRequest(cfg.HMACSecret, time.Now().Unix(), hdr, []byte(`{"other":"body"}`)), ""); s != http.StatusUnauthorized {
		t.Errorf("signature over another body: %d, want 401", s)
	}
	cfg.HMACSecret = nil
	open, _ := New(context.Background(), cfg)
	if s := post(open, "", ""); s != http.StatusUnauthorized {
		t.Errorf("no method configured: %d, want 401 (fail closed)", s)
	}
	cfg.BearerToken = "tok"
	tok, _ := New(context.Background(), cfg)
	if s := post(tok, "", "tok"); s != http.StatusUnprocessableEntity {
		t.Errorf("good token: %d", s)
	}
	if s := post(tok, "", "tok2"); s != http.StatusUnauthorized {
		t.Errorf("bad token: %d", s)
	}
}

func TestNewValidates(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"no pool":          func(c *Config) { c.Pool = nil },
		"no apply":         func(c *Config) { c.Apply = nil },
		"broker kind":      func(c *Config) { c.ReceiptKind = receipt.BrokerPublication },
		"ops without proj": func(c *Config) { c.ReceiptKind = "operations_projection" },
		"unknown kind":     func(c *Config) { c.ReceiptKind = "not_registered" },
		"half projection":  func(c *Config) { c.ProjectionName = "p" },
		"no events":        func(c *Config) { c.SupportedEvents = nil },
	} {
		cfg := testConfig(t)
		edit(&cfg)
		if _, err := New(context.Background(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// downDB is a database that never answers.
type downDB struct{}

func (downDB) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	return nil, errors.New("connection refused")
}

// SPEC §13: without Config.Catalog, New reads the receipt catalog through Pool; when it cannot,
// the error wraps ErrCatalogUnavailable, and a configuration error is reported before the
// database is asked (so a caller can tell the two apart and retry only the first).
func TestNewLoadsCatalogAfterValidating(t *testing.T) {
	cfg := testConfig(t)
	cfg.Catalog, cfg.Pool = nil, downDB{}
	if _, err := New(context.Background(), cfg); !errors.Is(err, ErrCatalogUnavailable) {
		t.Fatalf("database down: %v, want ErrCatalogUnavailable", err)
	}
	cfg.SupportedEvents = nil
	if _, err := New(context.Background(), cfg); err == nil || errors.Is(err, ErrCatalogUnavailable) {
		t.Fatalf("bad configuration with the database down: %v, want the configuration error", err)
	}
}
