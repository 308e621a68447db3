package intake

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// OB703's detail names the delay only for the rate quota (R-OB-6); a body above max_body_bytes
// is OB703 without it and is final.
func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		o    Outcome
		want time.Duration
		ok   bool
	}{
		{Outcome{Outcome: OutcomeRejected, SQLState: SQLStateQuota, Detail: "quota of 5 accepted observations per minute exceeded; retryAfterSeconds=17"}, 17 * time.Second, true},
		{Outcome{Outcome: OutcomeRejected, SQLState: SQLStateQuota, Detail: "body of 900 bytes exceeds max_body_bytes 200 (not retryable as is)"}, 0, false},
		{Outcome{Outcome: OutcomeRejected, SQLState: SQLStateInvalid, Detail: "retryAfterSeconds=3"}, 0, false},
		{Outcome{Outcome: OutcomeAcceptedNew}, 0, false},
	} {
		got, ok := c.o.RetryAfter()
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.o.Detail, got, ok, c.want, c.ok)
		}
	}
}

// The Submission@1 text: the five members only, the claimed time omitted when zero, written in
// UTC, no HTML escaping; a body that is not JSON is not encoded (answered OB201 locally).
func TestNewItem(t *testing.T) {
	it := newItem(Submission{ObservationID: "0b8e2f4c-6f53-4a39-9a55-3f0c2b1d7e11", ObservationType: "request_attempt",
		ObservationSchemaVersion: 1, Body: []byte(`{"requestId":"a<b&c"}`)})
	want := `{"observationId":"0b8e2f4c-6f53-4a39-9a55-3f0c2b1d7e11","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"a<b&c"}}`
	if string(it.doc) != want {
		t.Fatalf("%s\nwant %s", it.doc, want)
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 123000000, time.FixedZone("x", 3600))
	it = newItem(Submission{ObservationType: "t", ObservationSchemaVersion: 2, SourceClaimedObservedAt: at, Body: []byte(`{}`)})
	if len(it.id) != 36 || string(it.doc) != fmt.Sprintf(`{"observationId":"%s","observationType":"t","observationSchemaVersion":2,"sourceClaimedObservedAt":"2026-12-04T09:00:00.123Z","body":{}}`, it.id) {
		t.Fatalf("generated: %s", it.doc)
	}
	if it := newItem(Submission{ObservationID: "x", Body: []byte(`{"a":`)}); it.doc != nil || it.id != "x" {
		t.Fatalf("invalid body encoded: %s", it.doc)
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "22023"}, false},
		{&pgconn.PgError{Code: "OB704"}, false},
		{errors.New("dial tcp: connection refused"), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errOutcomeCount, false},
	} {
		if got := transient(fmt.Errorf("call: %w", c.err)); got != c.want {
			t.Errorf("%v: transient %v, want %v", c.err, got, c.want)
		}
	}
}
