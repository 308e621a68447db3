package consumer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPUnauthenticatedFlood measures what 12 concurrent unauthenticated 4 MiB POSTs
// (a well-formed but wrong signature, as an attacker without the secret would send) cost the
// consumer kit: the peak Go heap in use above the idle baseline while they are served
// (issue 11 finding 4). It uses only the kit's long-standing API so the same file measures the
// kit before and after the bound. Run: go test ./consumer -run '^$' -bench HTTPUnauthenticatedFlood
func BenchmarkHTTPUnauthenticatedFlood(b *testing.B) {
	b.Run("hmac", func(b *testing.B) { benchFlood(b, false) })
	b.Run("bearer", func(b *testing.B) { benchFlood(b, true) })
}

// benchFlood: bearer=false sends a wrong v1 signature to an HMAC consumer; bearer=true sends a
// wrong token to a bearer-token consumer.
func benchFlood(b *testing.B, bearer bool) {
	const n, size = 12, 4 << 20
	t := &testing.T{}
	cfg := testConfig(t)
	cfg.MaxBodyBytes = size
	if bearer {
		cfg.HMACSecret, cfg.BearerToken = nil, "the-right-token-0123456789"
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	d := testDelivery(t, testEnv())
	body := make([]byte, size)
	var peak uint64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak {
					peak = m.HeapInuse - base
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for j := 0; j < n; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
				req.Header.Set("Pgoutbox-Destination", d.Destination)
				req.Header.Set("Pgoutbox-Consumer", d.ConsumerName)
				req.Header.Set("Pgoutbox-Event-Id", d.EventID)
				req.Header.Set("Pgoutbox-Attempt-Number", "1")
				if bearer {
					req.Header.Set("Authorization", "Bearer wrong-token")
				} else {
					req.Header.Set("Pgoutbox-Signature", "t="+itoa(time.Now().Unix())+",v1="+string(bytes.Repeat([]byte("ab"), 32)))
				}
				resp, err := srv.Client().Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}(j)
		}
		wg.Wait()
		stop.Store(true)
		<-done
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

func itoa(v int64) string {
	var buf [20]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return string(buf[i:])
}
