package consumer

// Issue 21 item 4: upgrading the HMAC signature without breaking a consumer. The dispatcher's
// own HTTP transport (transport) against a consumer built on the obsolete body-only
// form and against the current kit, through the window (signature = "both") and after it.

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// oldFormConsumer is a consumer written against the earlier documented wire contract: it reads
// Pgoutbox-Signature, requires "sha256=<hex HMAC-SHA256(secret, body)>", knows no other header,
// and then applies the delivery (here through the kit's in-process adapter, which does not
// authenticate again).
func oldFormConsumer(kit *consumer.Consumer, secret []byte, refused *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hexSig, ok := strings.CutPrefix(r.Header.Get(wire.HeaderSignature), "sha256=")
		got, err := hex.DecodeString(hexSig)
		if !ok || err != nil || !hmac.Equal(got, wire.BodyMAC(secret, body)) {
			refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		d := wire.Delivery{Destination: r.Header.Get(wire.HeaderDestination), ConsumerName: r.Header.Get(wire.HeaderConsumer),
			EventID: r.Header.Get(wire.HeaderEventID), AttemptID: r.Header.Get(wire.HeaderAttemptID),
			EnvelopeSHA256: r.Header.Get(wire.HeaderEnvelopeSHA256), EnvelopeDigestAlgorithmVersion: "jcs-sha256-v1",
			ExpectedReceiptType: r.Header.Get(wire.HeaderReceiptType), Envelope: body}
		res, _ := kit.Deliver(r.Context(), d)
		if res.Status != wire.Acknowledged {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"consumer_unavailable"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ack":` + string(res.Ack) + `,"receipt":` + string(res.Receipt) + `}`))
	})
}

func upgradeTransport(t *testing.T, url, signature string) *transport.HTTP {
	t.Helper()
	tr, err := transport.NewHTTP(transport.HTTPOptions{URL: url, Timeout: 20 * time.Second,
		Auth: config.AuthHMAC, Secret: config.NewSecret(consumerfix.Secret), Signature: signature})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// The upgrade path of docs/transport-http.md: (1) the dispatcher sends signature = "both": the
// old-form consumer keeps acknowledging (it reads the body-only form) and the current kit —
// without AcceptBodyOnlySignature — acknowledges too (it reads the v1 form in
// Pgoutbox-Signature-V1); (2) the window closes (signature = "v1"): the kit keeps working, the
// old-form consumer would now be refused, which is why consumers are upgraded first. The kit
// never accepts the body-only form alone unless configured to, window or not.
func TestSignatureUpgradeWindowKeepsOldConsumerWorking(t *testing.T) {
	t.Parallel()
	b := consumerfix.Setup(t)
	spec := consumerfix.Spec(t, reference.MeteringInputProcessorConsumer)
	kit := b.Kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret = consumerfix.Secret })
	var oldRefused atomic.Int64
	oldSrv := httptest.NewServer(oldFormConsumer(kit, consumerfix.Secret, &oldRefused))
	defer oldSrv.Close()
	newSrv := httptest.NewServer(kit)
	defer newSrv.Close()
	deliver := func(tr *transport.HTTP, name string) wire.Result {
		t.Helper()
		d := consumerfix.Delivery(t, spec, consumerfix.Env(reference.ExecutionAttemptEligibility, name, 1))
		r, err := tr.Deliver(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == wire.Acknowledged {
			if n := consumerfix.Receipts(t, b.Pool, spec.ConsumerName, d.EventID); n != 1 {
				t.Fatalf("%s acknowledged with %d receipts", name, n)
			}
		}
		return r
	}

	// Before the window an old-form consumer gets v1 only and refuses it (the break of issue 21).
	if r := deliver(upgradeTransport(t, oldSrv.URL, config.SignatureV1), "before-old"); r.Status == wire.Acknowledged || oldRefused.Load() != 1 {
		t.Fatalf("old-form consumer accepted a v1-only request: %+v", r)
	}
	// The window: both forms.
	consumerfix.WantAck(t, deliver(upgradeTransport(t, oldSrv.URL, config.SignatureBoth), "window-old"))
	consumerfix.WantAck(t, deliver(upgradeTransport(t, newSrv.URL, config.SignatureBoth), "window-new"))
	// A destination registered for the old form only (body-sha256): the old consumer works; the
	// kit refuses it unless AcceptBodyOnlySignature is set.
	consumerfix.WantAck(t, deliver(upgradeTransport(t, oldSrv.URL, config.SignatureBodySHA256), "bodyonly-old"))
	consumerfix.Want(t, deliver(upgradeTransport(t, newSrv.URL, config.SignatureBodySHA256), "bodyonly-new"), wire.Retryable, "consumer_unavailable")
	lenient := b.Kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret, c.AcceptBodyOnlySignature = consumerfix.Secret, true })
	lenientSrv := httptest.NewServer(lenient)
	defer lenientSrv.Close()
	consumerfix.WantAck(t, deliver(upgradeTransport(t, lenientSrv.URL, config.SignatureBodySHA256), "bodyonly-lenient"))
	// The window closed.
	consumerfix.WantAck(t, deliver(upgradeTransport(t, newSrv.URL, config.SignatureV1), "after-new"))
	if oldRefused.Load() != 1 {
		t.Fatalf("old-form consumer refused %d requests during the window", oldRefused.Load()-1)
	}
}

// The dispatcher's configuration accepts signature only for hmac http destinations and only
// the three forms.
func TestSignatureSettingValidated(t *testing.T) {
	t.Parallel()
	for form, ok := range map[string]bool{config.SignatureV1: true, config.SignatureBoth: true, config.SignatureBodySHA256: true, "sha512": false} {
		_, err := transport.NewHTTP(transport.HTTPOptions{URL: "http://127.0.0.1:1", Auth: config.AuthHMAC,
			Secret: config.NewSecret(consumerfix.Secret), Signature: form})
		if (err == nil) != ok {
			t.Errorf("signature %q: err %v", form, err)
		}
	}
}
