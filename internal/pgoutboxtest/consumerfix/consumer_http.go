package consumerfix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/wire"
)

// Secret is the HMAC secret of the consumer HTTP handlers under test.
var Secret = []byte("a-test-secret-of-enough-length-0123456789")

// Sign is the v1 signature the dispatcher would send for d now (wire.SignRequest).
func Sign(secret []byte, d wire.Delivery) string {
	h := http.Header{}
	wire.SetHeaders(h, d)
	return wire.SignRequest(secret, time.Now().Unix(), h, d.Envelope)
}

// Post posts d to url as the HTTP transport does (docs/transport-http.md), signing with
// secret when non-nil and sending extra headers; it returns the status and body.
func Post(t *testing.T, url string, d wire.Delivery, secret []byte, extra map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Envelope))
	if err != nil {
		t.Fatal(err)
	}
	h := req.Header
	wire.SetHeaders(h, d)
	if secret != nil {
		h.Set(wire.HeaderSignature, Sign(secret, d))
	}
	for k, v := range extra {
		h.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// ErrorCode is the code of an HTTP error body (wire.HTTPErrorBody) the handler answered with.
func ErrorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e wire.HTTPErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Code
}
