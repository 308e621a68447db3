package tests

// Issue 26 item 1: stalled or slow unauthenticated clients must not silence a consumer. Real
// HTTP server (configured like refconsumer's), real PostgreSQL behind the kit, raw TCP attackers.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

const (
	stallConns    = 64
	stallDeclared = 1 << 20 // declared Content-Length
	stallSent     = 1 << 10 // bytes of body actually sent before going silent
)

// stallServer starts a real server for kit with refconsumer's timeouts.
func stallServer(t *testing.T, kit *consumer.Consumer) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(kit)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout = 60 * time.Second
	srv.Config.WriteTimeout = 120 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// stallAttack opens n connections, each sending a well-formed request for d with the signature
// value sig(i), a declared body of stallDeclared bytes, stallSent of them, then nothing. It
// returns once every request is written; the connections stay open until the test ends. Each
// connection's answer (status line), if any, is recorded by a reader goroutine.
func stallAttack(t *testing.T, addr string, d wire.Delivery, n int, sig func(i int, h http.Header) string) *stallAnswers {
	t.Helper()
	a := &stallAnswers{status: map[int]int{}}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		h := http.Header{}
		wire.SetHeaders(h, d)
		h.Set(wire.HeaderAttemptID, fmt.Sprintf("5d7c0e0a-%04x-4c1e-9a55-6f0e2f1d9a01", i))
		h.Set(wire.HeaderSignature, sig(i, h))
		var req bytes.Buffer
		fmt.Fprintf(&req, "POST / HTTP/1.1\r\nHost: consumer\r\nContent-Length: %d\r\n", stallDeclared)
		_ = h.Write(&req)
		req.WriteString("\r\n")
		req.Write(bytes.Repeat([]byte{'{'}, stallSent))
		if _, err := conn.Write(req.Bytes()); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int, conn net.Conn) {
			wg.Done()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				a.add(i, resp.StatusCode)
				resp.Body.Close()
			}
		}(i, conn)
	}
	wg.Wait()
	return a
}

type stallAnswers struct {
	mu     sync.Mutex
	status map[int]int
}

func (a *stallAnswers) add(i, s int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status[i] = s
}

func (a *stallAnswers) snapshot() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := map[int]int{}
	for k, v := range a.status {
		m[k] = v
	}
	return m
}

// waitStats polls the kit's counters (state, not timing) until ok or 30 s.
func waitStats(t *testing.T, kit *consumer.Consumer, what string, ok func(consumer.HTTPStats) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for st := kit.HTTPStats(); !ok(st); st = kit.HTTPStats() {
		if time.Now().After(deadline) {
			t.Fatalf("never reached %s: %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// 64 connections with a fresh, well-formed v1 signature that does not verify (no secret needed),
// 1 KiB of a declared 1 MiB body, then nothing: each is refused 401 from its headers (the MAC is
// checked against the claimed envelope digest before the body), no body byte is buffered, and a
// genuine signed delivery sent while all 64 connections are still open is applied and answered
// 200 within 1 s (a security bound, generous: it is milliseconds). A signature that verifies for
// its headers but whose body does not hash to the claimed digest is refused too (body_digest).
func TestConsumerHTTPStalledV1ConnectionsDoNotBlockGenuine(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	kit := b.kit(t, spec.ConsumerName, func(c *consumer.Config) { c.HMACSecret = ckSecret })
	srv := stallServer(t, kit)
	attackerD := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-stall", 1))
	answers := stallAttack(t, srv.Listener.Addr().String(), attackerD, stallConns, func(i int, h http.Header) string {
		return wire.SignRequest([]byte("not-the-secret-not-the-secret"), time.Now().Unix(), h, nil)
	})
	// Barrier: every attacker request has reached the handler and been decided.
	waitStats(t, kit, "64 refusals", func(st consumer.HTTPStats) bool { return st.RefusedUnread >= stallConns })

	d := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-genuine", 1))
	start := time.Now()
	status, body := ckPost(t, srv.URL, d, ckSecret, nil)
	elapsed := time.Since(start)
	if status != http.StatusOK {
		t.Fatalf("genuine delivery: %d %s", status, body)
	}
	t.Logf("genuine v1 delivery answered in %s beside %d stalled connections", elapsed, stallConns)
	if elapsed > time.Second {
		t.Fatalf("genuine delivery answered after %s with %d stalled connections, want within 1s", elapsed, stallConns)
	}
	if n := ckReceipts(t, b.pool, spec.ConsumerName, d.EventID); n != 1 {
		t.Fatalf("receipts %d, want 1", n)
	}
	st := kit.HTTPStats()
	if st.UnauthenticatedBytes != 0 || st.PeakUnauthenticatedReading != 0 {
		t.Fatalf("bodies were read before authentication: %+v", st)
	}
	for i, s := range answers.snapshot() {
		if s != http.StatusUnauthorized {
			t.Fatalf("attacker %d answered %d, want 401", i, s)
		}
	}

	// Headers signed correctly (claimed digest included), body swapped on the way.
	d2 := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-swap", 1))
	sig := ckSign(ckSecret, d2)
	swapped := d2
	swapped.Envelope = bytes.Replace(d2.Envelope, []byte("attempt-swap"), []byte("attempt-swaq"), 1)
	status, body = ckPost(t, srv.URL, swapped, nil, map[string]string{wire.HeaderSignature: sig})
	if status != http.StatusUnauthorized || !strings.Contains(string(body), "body_digest") {
		t.Fatalf("swapped body: %d %s, want 401 body_digest", status, body)
	}
	if n := ckReceipts(t, b.pool, spec.ConsumerName, d2.EventID); n != 0 {
		t.Fatalf("a swapped body wrote a receipt")
	}
}

// The obsolete body-only signature (AcceptBodyOnlySignature, an upgrade window) needs the body
// before its sender is known. 64 such stalled connections (wrong MAC, 1 KiB of 1 MiB) fill the
// MaxUnauthenticatedReads slots and queue; a genuine body-only delivery arriving after them gets
// the next slot (the most recent waiter first), a stalled holder loses its slot after
// UnauthenticatedStall, and the genuine one is applied and answered 200 within 2 s. Memory stays
// bounded: at most MaxUnauthenticatedReads bodies are read at once.
func TestConsumerHTTPStalledBodyOnlySlotsGoToFreshRequest(t *testing.T) {
	t.Parallel()
	b := ckSetup(t)
	spec := ckSpec(t, reference.MeteringInputProcessorConsumer)
	kit := b.kit(t, spec.ConsumerName, func(c *consumer.Config) {
		c.HMACSecret, c.AcceptBodyOnlySignature = ckSecret, true
	})
	srv := stallServer(t, kit)
	attackerD := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-stall", 1))
	answers := stallAttack(t, srv.Listener.Addr().String(), attackerD, stallConns, func(i int, _ http.Header) string {
		return wire.Sign([]byte("not-the-secret-not-the-secret"), nil)
	})
	// Barrier: every attacker has reached the handler (reading, waiting, or already cut) and the
	// 4 slots are held by attackers — the genuine request is the most recent.
	waitStats(t, kit, "all attackers in, slots full", func(st consumer.HTTPStats) bool {
		return st.UnauthenticatedReading == 4 && st.UnauthenticatedReading+st.UnauthenticatedWaiting+st.EvictedReads >= stallConns
	})

	d := ckDelivery(t, spec, ckEnv(reference.ExecutionAttemptEligibility, "attempt-genuine", 1))
	start := time.Now()
	status, body := ckPost(t, srv.URL, d, nil, map[string]string{wire.HeaderSignature: wire.Sign(ckSecret, d.Envelope)})
	elapsed := time.Since(start)
	if status != http.StatusOK {
		t.Fatalf("genuine delivery: %d %s", status, body)
	}
	// Expected ≈ UnauthenticatedStall (250 ms) + one tick; the bound is generous for a loaded
	// machine (a security property, not a speed claim).
	t.Logf("genuine body-only delivery answered in %s behind %d stalled connections", elapsed, stallConns)
	if elapsed > 2*time.Second {
		t.Fatalf("genuine body-only delivery answered after %s behind %d stalled connections, want within 2s", elapsed, stallConns)
	}
	if n := ckReceipts(t, b.pool, spec.ConsumerName, d.EventID); n != 1 {
		t.Fatalf("receipts %d, want 1", n)
	}
	st := kit.HTTPStats()
	if st.PeakUnauthenticatedReading > 4 || st.EvictedReads < 1 {
		t.Fatalf("stats %+v: peak must stay <= 4 and a stalled slot must have been taken away", st)
	}
	if st.UnauthenticatedBytes > int64(stallConns*stallSent+len(d.Envelope)) {
		t.Fatalf("read more than was sent: %+v", st)
	}
	// Every attacker that was answered got 408 (cut) — none was applied.
	for i, s := range answers.snapshot() {
		if s != http.StatusRequestTimeout {
			t.Fatalf("attacker %d answered %d, want 408", i, s)
		}
	}
}
