package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

// BenchmarkConsumerDeliver: deliveries/s through consumer.Deliver of the metering recorder
// (two domain rows and a receipt per event, real PostgreSQL, 8 deliveries in flight), with the
// transaction-based Apply and with the one-round-trip Mutate (issue 21 item 2). The events are
// built before the timer; each iteration delivers a new event.
func BenchmarkConsumerDeliver(b *testing.B) {
	for _, mode := range []string{"apply", "mutate"} {
		b.Run(mode, func(b *testing.B) {
			pool := consumerfix.Setup(b).Pool
			spec, _ := reference.Lookup(reference.MeteringInputProcessorConsumer)
			cfg := spec.Config(pool)
			if mode == "apply" {
				cfg = spec.ApplyConfig(pool)
			}
			cfg.Role = consumerfix.Role
			kit, err := consumer.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ds := make([]wire.Delivery, b.N)
			for i := range ds {
				ds[i] = consumerfix.Delivery(b, spec, consumerfix.Env(reference.ExecutionAttemptEligibility, fmt.Sprintf("bench-%d", i), 1))
			}
			b.ResetTimer()
			// 8 deliveries in flight, as a dispatcher with per-destination concurrency sends them.
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < len(ds); i = int(next.Add(1)) - 1 {
						r, _ := kit.Deliver(b.Context(), ds[i])
						if r.Status != wire.Acknowledged {
							b.Errorf("delivery %d: %s %s %s", i, r.Status, r.Code, r.Ref)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}
