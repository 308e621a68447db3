package soak

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/oceanway/pgoutbox/wire"
)

// faults injects transient failures at the consumer side (T-8):
//   - before: the delivery is answered retryable consumer_unavailable (HTTP 503) BEFORE the
//     consumer sees it — nothing applied;
//   - lost ack: the consumer applies the event and commits its receipt, then the answer is lost
//     (the HTTP connection is dropped / the in-process call fails) — the dispatcher records a
//     retryable transport_error and re-delivers; the consumer finds its receipt and answers the
//     same ack: no double effect (R-AK-8).
type faults struct {
	before, lost float64

	mu  sync.Mutex
	rnd *rand.Rand

	injectedBefore atomic.Int64
	injectedLost   atomic.Int64
	answered       atomic.Int64 // successful answers that reached the dispatcher
	calls          atomic.Int64

	lostMu   sync.Mutex
	lostKeys map[deliveryKey]int
}

type deliveryKey struct{ Destination, EventID string }

func newFaults(before, lost float64, seed uint64) *faults {
	return &faults{before: before, lost: lost, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), lostKeys: map[deliveryKey]int{}}
}

type decision int

const (
	pass decision = iota
	failBefore
	loseAck
)

func (f *faults) decide() decision {
	f.calls.Add(1)
	f.mu.Lock()
	x := f.rnd.Float64()
	f.mu.Unlock()
	switch {
	case x < f.before:
		return failBefore
	case x < f.before+f.lost:
		return loseAck
	}
	return pass
}

func (f *faults) recordLost(dest, eventID string) {
	f.injectedLost.Add(1)
	f.lostMu.Lock()
	f.lostKeys[deliveryKey{dest, eventID}]++
	f.lostMu.Unlock()
}

func (f *faults) lostDeliveries() []deliveryKey {
	f.lostMu.Lock()
	defer f.lostMu.Unlock()
	out := make([]deliveryKey, 0, len(f.lostKeys))
	for k := range f.lostKeys {
		out = append(out, k)
	}
	return out
}

// errLostAck is what the in-process path returns for a lost answer (a transport failure).
var errLostAck = errors.New("soak: injected lost ack (the consumer committed; its answer was dropped)")

// wrapConsumer injects faults around an in-process consumer.
func (f *faults) wrapConsumer(c wire.Consumer) func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	return func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
		switch f.decide() {
		case failBefore:
			f.injectedBefore.Add(1)
			return wire.Result{Status: wire.Retryable, Code: "consumer_unavailable", Ref: "soak:injected_before_apply"}, nil
		case loseAck:
			res, err := c.Deliver(ctx, d)
			if err == nil && res.Status == wire.Acknowledged {
				f.recordLost(d.Destination, d.EventID)
				return wire.Result{}, errLostAck
			}
			return res, err
		}
		res, err := c.Deliver(ctx, d)
		if err == nil && res.Status == wire.Acknowledged {
			f.answered.Add(1)
		}
		return res, err
	}
}

// wrapHandler injects faults around an HTTP consumer handler.
func (f *faults) wrapHandler(dest string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch f.decide() {
		case failBefore:
			f.injectedBefore.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"consumer_unavailable","ref":"soak:injected_before_apply"}`))
			return
		case loseAck:
			rec := &bufferedWriter{header: http.Header{}}
			h.ServeHTTP(rec, r)
			if rec.status == http.StatusOK {
				f.recordLost(dest, r.Header.Get(wire.HeaderEventID))
			} else {
				rec.flushTo(w) // nothing committed: pass the real answer on
				return
			}
			// The receipt is committed; drop the connection so the answer never arrives.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusOK {
			f.answered.Add(1)
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// bufferedWriter holds an answer back (the lost-ack path decides afterwards what to do with it).
type bufferedWriter struct {
	header http.Header
	status int
	body   []byte
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.body = append(b.body, p...)
	return len(p), nil
}

func (b *bufferedWriter) flushTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body)
}
