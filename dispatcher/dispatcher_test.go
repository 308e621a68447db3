package dispatcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

func claimed(t *testing.T, env string) pgcall.ClaimedDelivery {
	t.Helper()
	c, err := canon.Canonicalize([]byte(env))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	proj, ver := "operations_timeline", 1
	return pgcall.ClaimedDelivery{
		Destination: "core_operations", ConsumerName: "operations_projector",
		EventID: "11111111-2222-4333-8444-555555555555", AttemptID: "a", LeaseToken: "secret-token", AttemptNumber: 2,
		ExpectedReceiptType: "OperationsProjectionAppliedReceipt", ExpectedReceiptSchemaVersion: 1,
		RequiredProjectionName: &proj, RequiredProjectionVersion: &ver,
		EventEnvelope: []byte(env), EventEnvelopeDigestAlgorithmVersion: canon.Algorithm,
		EventEnvelopeSHA256: hex.EncodeToString(sum[:]), EventType: "run.created@2.0", EventSchemaVersion: "2.0",
	}
}

const envOK = `{"payload": {"b": 2, "a": 1}, "eventType": "run.created@2.0", "eventSchemaVersion": "2.0",
	"eventId": "11111111-2222-4333-8444-555555555555"}`

// R-DP-1: the envelope is canonicalized and its digest compared before any delivery.
func TestVerify(t *testing.T) {
	t.Parallel()
	r := claimed(t, envOK)
	d, code := Verify(r)
	if code != "" {
		t.Fatalf("valid envelope refused: %s", code)
	}
	if !strings.HasPrefix(string(d.Envelope), `{"eventId":`) || strings.Contains(string(d.Envelope), " ") {
		t.Fatalf("delivered bytes are not canonical: %s", d.Envelope)
	}
	if d.RequiredProjectionName != "operations_timeline" || d.RequiredProjectionVersion != 1 || d.AttemptNumber != 2 {
		t.Fatalf("delivery fields: %+v", d)
	}

	bad := r
	bad.EventEnvelopeSHA256 = strings.Repeat("0", 64)
	if _, code := Verify(bad); code != "digest_conflict" {
		t.Fatalf("digest mismatch: %q", code)
	}
	bad = r
	bad.EventEnvelopeDigestAlgorithmVersion = "sha1"
	if _, code := Verify(bad); code != "unsupported_schema" {
		t.Fatalf("unknown algorithm: %q", code)
	}
	bad = claimed(t, envOK)
	bad.EventEnvelope = []byte(`{"a": 1.5}`)
	if _, code := Verify(bad); code != "envelope_invalid" {
		t.Fatalf("not canonicalizable: %q", code)
	}
	other := claimed(t, strings.Replace(envOK, "run.created@2.0", "wallet.reserved@2.0", 1))
	if _, code := Verify(other); code != "envelope_invalid" {
		t.Fatalf("envelope of another type than the row: %q", code)
	}
	other = claimed(t, strings.Replace(envOK, "11111111-2222", "99999999-2222", 1))
	if _, code := Verify(other); code != "envelope_invalid" {
		t.Fatalf("envelope of another event id: %q", code)
	}
}

// P-5, D-2: with the canonical text the producer's database verified, sha256 of those bytes is
// the whole check: they are delivered as they are (the same bytes, never re-canonicalized).
func TestVerifyCanonicalSHA256Only(t *testing.T) {
	t.Parallel()
	r := claimed(t, envOK)
	c, _ := canon.Canonicalize([]byte(envOK))
	r.EventEnvelopeCanonical, r.EventEnvelope = c, c
	d, code := Verify(r)
	if code != "" {
		t.Fatalf("valid canonical envelope refused: %s", code)
	}
	if &d.Envelope[0] != &c[0] || len(d.Envelope) != len(c) {
		t.Fatal("the delivered envelope is not the stored canonical bytes")
	}
	bad := r
	bad.EventEnvelopeSHA256 = strings.Repeat("0", 64)
	if _, code := Verify(bad); code != "digest_conflict" {
		t.Fatalf("digest mismatch: %q", code)
	}
	bad = r
	bad.EventEnvelopeCanonical = append([]byte(nil), c...)
	bad.EventEnvelopeCanonical[len(c)-2] ^= 1 // one flipped bit
	if _, code := Verify(bad); code != "digest_conflict" {
		t.Fatalf("altered bytes: %q", code)
	}
	bad = r
	bad.EventEnvelopeDigestAlgorithmVersion = "sha1"
	if _, code := Verify(bad); code != "unsupported_schema" {
		t.Fatalf("unknown algorithm: %q", code)
	}
	// No canonicalization on this path: bytes whose sha256 matches are delivered even when they
	// are not in canonical form (what the database stored and verified is authoritative).
	loose := []byte(envOK)
	sum := sha256.Sum256(loose)
	r2 := claimed(t, envOK)
	r2.EventEnvelopeCanonical, r2.EventEnvelope, r2.EventEnvelopeSHA256 = loose, loose, hex.EncodeToString(sum[:])
	if d, code := Verify(r2); code != "" || string(d.Envelope) != envOK {
		t.Fatalf("sha256-matching bytes: %q", code)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

// R-AK-7: transport failures are normalized retryable codes.
func TestClassifyTransportError(t *testing.T) {
	t.Parallel()
	cases := map[error]string{
		fmt.Errorf("x: %w", context.DeadlineExceeded): "consumer_timeout",
		fmt.Errorf("x: %w", timeoutErr{}):             "consumer_timeout",
		errors.New("connection refused"):              "transport_error",
	}
	for err, want := range cases {
		if got := classifyTransportError(err); got != want {
			t.Errorf("%v → %s, want %s", err, got, want)
		}
	}
}

func TestDatabaseErrorClasses(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("call: %w", &pgconn.PgError{Code: code}) }
	for _, c := range []string{"08006", "57P01", "57014", "53300", "40001"} {
		if !isTransientDB(pg(c)) {
			t.Errorf("%s not transient", c)
		}
	}
	for _, c := range []string{"OB001", "OB002", "22023", "42501", "23503"} {
		if isTransientDB(pg(c)) {
			t.Errorf("%s transient", c)
		}
	}
	if !isTransientDB(errors.New("dial tcp: connection refused")) || isTransientDB(context.Canceled) {
		t.Error("connection errors are transient, cancellation is not")
	}
	for _, c := range []string{"OB002", "OB201", "22P02"} {
		e := &pgcall.Error{Sentinel: pgcall.SQLStates[c], PgErr: &pgconn.PgError{Code: c}}
		if c == "22P02" {
			e.Sentinel = errors.New("x")
		}
		if !isDocumentRejection(fmt.Errorf("ack: %w", e)) {
			t.Errorf("%s is a document rejection", c)
		}
	}
	if isDocumentRejection(pg("OB001")) || isDocumentRejection(pg("08006")) {
		t.Error("fencing/connection errors are not document rejections")
	}
}

// R-DP-5: kernel errors are logged without their DETAIL; passwords are cut.
func TestSafeErr(t *testing.T) {
	t.Parallel()
	e := fmt.Errorf("ack delivery: %w", &pgcall.Error{Sentinel: pgcall.ErrAckRejected,
		PgErr: &pgconn.PgError{Code: "OB002", Message: "ack rejected", Detail: `receipt {"payload":"secret"}`}})
	if s := safeErr(e); strings.Contains(s, "secret") || !strings.Contains(s, "OB002") {
		t.Fatalf("safeErr = %q", s)
	}
	if s := safeErr(errors.New("connect host=db password=hunter2 user=x")); strings.Contains(s, "hunter2") {
		t.Fatalf("safeErr = %q", s)
	}
}

func TestBackoffBounded(t *testing.T) {
	t.Parallel()
	b := newBackoff(100*time.Millisecond, time.Second)
	for i := 0; i < 20; i++ {
		if d := b.next(); d < 80*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("backoff %s out of bounds", d)
		}
	}
	b.reset()
	if d := b.next(); d > 120*time.Millisecond {
		t.Fatalf("reset backoff %s", d)
	}
}
