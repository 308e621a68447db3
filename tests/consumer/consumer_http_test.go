package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

func ckKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %s", raw)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// R-CO-5, R-DP-2: the kit's http.Handler speaks the HTTP wire contract. A missing or bad
// signature (or a body changed after signing) is 401 and nothing is applied; success is 200
// with exactly {ack, receipt}, ActiveConsumerAck@1 with exactly its six keys and the five of
// appliedReceipt; the same bytes on redelivery; non-retryable codes are 422 (409 for
// receipt_conflict), retryable ones 503 (429 for capacity_protection).
func TestConsumerHTTPHandler(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	srv := httptest.NewServer(b.Kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret = consumerfix.Secret }))
	defer srv.Close()
	env := consumerfix.Env(reference.ExecutionAttemptEligibility, "attempt-h", 1)
	d := consumerfix.Delivery(t, spec, env)

	for name, tc := range map[string]struct {
		secret []byte
		extra  map[string]string
	}{
		"missing signature": {nil, nil},
		"wrong secret":      {[]byte("another-secret-another-secret-0000"), nil},
		"malformed":         {nil, map[string]string{wire.HeaderSignature: "sha256=zz"}},
		"bearer instead":    {nil, map[string]string{"Authorization": "Bearer " + string(consumerfix.Secret)}},
	} {
		status, body := consumerfix.Post(t, srv.URL, d, tc.secret, tc.extra)
		if status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d (%s), want 401", name, status, body)
		}
	}
	// Signed, then the body altered in transit (its digest header altered to match).
	altered := consumerfix.Delivery(t, spec, env)
	sig := consumerfix.Sign(consumerfix.Secret, altered)
	env2 := consumerfix.Env(reference.ExecutionAttemptEligibility, "attempt-h", 1)
	env2["eventId"] = env["eventId"]
	altered2 := consumerfix.Delivery(t, spec, env2)
	if status, _ := consumerfix.Post(t, srv.URL, altered2, nil, map[string]string{wire.HeaderSignature: sig}); status != http.StatusUnauthorized {
		t.Fatalf("altered body: status %d, want 401", status)
	}
	if n := consumerfix.Effects(t, b.Pool, spec, d.EventID); n != 0 {
		t.Fatalf("an unauthenticated request was applied")
	}
	if n := consumerfix.Receipts(t, b.Pool, spec.ConsumerName, d.EventID); n != 0 {
		t.Fatalf("an unauthenticated request wrote a receipt")
	}

	status, body := consumerfix.Post(t, srv.URL, d, consumerfix.Secret, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", status, body)
	}
	if got := strings.Join(ckKeys(t, body), ","); got != "ack,receipt" {
		t.Fatalf("success body keys %s", got)
	}
	var ok wire.HTTPSuccessBody
	if err := json.Unmarshal(body, &ok); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ckKeys(t, ok.Ack), ","); got != "appliedReceipt,consumerName,destination,eventEnvelopeDigestAlgorithmVersion,eventEnvelopeSha256,eventId" {
		t.Fatalf("ack keys %s", got)
	}
	var ack struct{ AppliedReceipt json.RawMessage }
	_ = json.Unmarshal(ok.Ack, &ack)
	if got := strings.Join(ckKeys(t, ack.AppliedReceipt), ","); got != "kind,meteringInputProcessorConsumerReceiptDigest,meteringInputProcessorConsumerReceiptDigestAlgorithmVersion,meteringInputProcessorConsumerReceiptRef,meteringInputProcessorConsumerReceiptSchemaVersion" {
		t.Fatalf("appliedReceipt keys %s", got)
	}
	consumerfix.WantAck(t, wire.Result{Status: wire.Acknowledged, Ack: ok.Ack, Receipt: ok.Receipt})
	// A redelivery is a new attempt (a new attempt number and so a new signature: the same
	// signed request twice would be refused as a replay, R-SEC-5).
	redelivery := d
	redelivery.AttemptNumber++
	if status, again := consumerfix.Post(t, srv.URL, redelivery, consumerfix.Secret, nil); status != http.StatusOK || !bytes.Equal(again, body) {
		t.Fatalf("redelivery: %d %s, want the same 200 body", status, again)
	}
	if n := consumerfix.Effects(t, b.Pool, spec, d.EventID); n != 1 {
		t.Fatalf("applied %d times", n)
	}

	// 409 receipt_conflict: same event id, other content.
	env["payload"] = map[string]any{"other": "content"}
	if status, body := consumerfix.Post(t, srv.URL, consumerfix.Delivery(t, spec, env), consumerfix.Secret, nil); status != http.StatusConflict || consumerfix.ErrorCode(t, body) != "receipt_conflict" {
		t.Fatalf("tampered: %d %s, want 409 receipt_conflict", status, body)
	}
	// A claimed digest the body does not hash to: with a v1 signature the MAC is checked over the
	// claimed digest before the body is read, so a request signed over the real body does not
	// verify (401, issue 26; the swapped-body case is TestConsumerHTTPStalledV1ConnectionsDo…);
	// digest_conflict (422) is what Deliver answers in process (consumer.TestCheckBeforeDatabase).
	// Then 422 unknown_event_type.
	bad := consumerfix.Delivery(t, spec, consumerfix.Env(reference.ExecutionAttemptEligibility, "attempt-i", 1))
	bad.EnvelopeSHA256 = ckFlip(bad.EnvelopeSHA256)
	if status, body := consumerfix.Post(t, srv.URL, bad, consumerfix.Secret, nil); status != http.StatusUnauthorized || consumerfix.ErrorCode(t, body) != "unauthorized" {
		t.Fatalf("digest: %d %s, want 401 unauthorized", status, body)
	}
	unknown := consumerfix.Delivery(t, spec, consumerfix.Env(reference.RunCreated, "run-i", 1))
	if status, body := consumerfix.Post(t, srv.URL, unknown, consumerfix.Secret, nil); status != http.StatusUnprocessableEntity || consumerfix.ErrorCode(t, body) != "unknown_event_type" {
		t.Fatalf("unknown: %d %s, want 422 unknown_event_type", status, body)
	}
	// 400: the delivery headers are missing.
	// (Signed as sent: the signature covers the delivery headers, so one removed after signing
	// is 401.)
	noID := redelivery
	noID.AttemptNumber++
	noID.EventID = ""
	if status, _ := consumerfix.Post(t, srv.URL, d, consumerfix.Secret, map[string]string{wire.HeaderEventID: ""}); status != http.StatusUnauthorized {
		t.Fatalf("header removed after signing: %d, want 401", status)
	}
	if status, _ := consumerfix.Post(t, srv.URL, noID, consumerfix.Secret, nil); status != http.StatusBadRequest {
		t.Fatalf("missing header: %d, want 400", status)
	}
}

// R-CO-3, R-AK-7 over HTTP: a revision gap is 503 awaiting_revision; an unreachable database is
// 503 database_unavailable; beyond MaxConcurrent it is 429 capacity_protection; a bearer token
// authenticates when configured.
func TestConsumerHTTPRetryableAndBearer(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	ops := consumerfix.Spec(t, reference.OperationsProjector)
	opsSrv := httptest.NewServer(b.Kit(t, ops.ConsumerName, func(c *consumer.Config) { c.BearerToken = "token-123" }))
	defer opsSrv.Close()
	bearer := map[string]string{"Authorization": "Bearer token-123"}
	gap := consumerfix.Delivery(t, ops, consumerfix.Env(reference.BillingFinalizationCommitted, "agg-g", 2))
	if status, body := consumerfix.Post(t, opsSrv.URL, gap, nil, bearer); status != http.StatusServiceUnavailable || consumerfix.ErrorCode(t, body) != "awaiting_revision" {
		t.Fatalf("gap: %d %s, want 503 awaiting_revision", status, body)
	}
	if status, _ := consumerfix.Post(t, opsSrv.URL, gap, nil, map[string]string{"Authorization": "Bearer nope"}); status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", status)
	}
	first := consumerfix.Delivery(t, ops, consumerfix.Env(reference.BillingFinalizationCommitted, "agg-g", 1))
	if status, body := consumerfix.Post(t, opsSrv.URL, first, nil, bearer); status != http.StatusOK {
		t.Fatalf("revision 1: %d %s", status, body)
	}

	// An unreachable database.
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	spec := consumerfix.Spec(t, reference.BillingSettlementCatchUpConsumer)
	deadKit, err := consumer.New(context.Background(), func() consumer.Config {
		c := spec.Config(dead)
		c.HMACSecret = consumerfix.Secret
		c.Catalog = testdb.Receipts(t) // loaded before the database died
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	deadSrv := httptest.NewServer(deadKit)
	defer deadSrv.Close()
	d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.MeteringSettlementInput, "dim-d", 1))
	if status, body := consumerfix.Post(t, deadSrv.URL, d, consumerfix.Secret, nil); status != http.StatusServiceUnavailable || consumerfix.ErrorCode(t, body) != "database_unavailable" {
		t.Fatalf("dead database: %d %s, want 503 database_unavailable", status, body)
	}

	// Capacity: one delivery in progress (held inside Apply), the next is 429.
	entered, release := make(chan struct{}), make(chan struct{})
	busy := b.Kit(t, spec.ConsumerName, func(c *consumer.Config) {
		c.HMACSecret, c.MaxConcurrent = consumerfix.Secret, 1
		inner := c.Apply
		c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
			close(entered)
			<-release
			return inner(ctx, tx, ev)
		}
	})
	busySrv := httptest.NewServer(busy)
	defer busySrv.Close()
	done := make(chan int, 1)
	go func() {
		status, _ := consumerfix.Post(t, busySrv.URL, d, consumerfix.Secret, nil)
		done <- status
	}()
	<-entered
	other := consumerfix.Delivery(t, spec, consumerfix.Env(reference.MeteringSettlementInput, "dim-e", 1))
	if status, body := consumerfix.Post(t, busySrv.URL, other, consumerfix.Secret, nil); status != http.StatusTooManyRequests || consumerfix.ErrorCode(t, body) != "capacity_protection" {
		t.Fatalf("busy: %d %s, want 429 capacity_protection", status, body)
	}
	close(release)
	if status := <-done; status != http.StatusOK {
		t.Fatalf("held delivery: %d", status)
	}
}

// R-DP-2, R-CO-5: the dispatcher's own HTTP transport (transport) and the kit agree:
// an acknowledged delivery through it carries the same ack as the in-process adapter gives for
// a redelivery, and a rejection maps to the same class and code.
func TestConsumerHTTPWithDispatcherTransport(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.OperationsProjector)
	kit := b.Kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret = consumerfix.Secret })
	srv := httptest.NewServer(kit)
	defer srv.Close()
	tr, err := transport.NewHTTP(transport.HTTPOptions{URL: srv.URL, Timeout: 20 * time.Second,
		Auth: config.AuthHMAC, Secret: config.NewSecret(consumerfix.Secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.RunCreated, "run-t", 1))
	r, err := tr.Deliver(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	consumerfix.WantAck(t, r)
	again := consumerfix.Deliver(t, kit, d)
	if !bytes.Equal(again.Ack, r.Ack) {
		t.Fatalf("in-process ack differs from the HTTP one:\n%s\n%s", again.Ack, r.Ack)
	}
	v := consumerfix.Env(reference.RunCreated, "run-u", 1)
	v["eventSchemaVersion"] = "9"
	r, err = tr.Deliver(context.Background(), consumerfix.Delivery(t, spec, v))
	if err != nil {
		t.Fatal(err)
	}
	consumerfix.Want(t, r, wire.NonRetryable, "unsupported_schema")
}
