//go:build bench

package bench

import (
	"testing"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/producer"
)

// BenchmarkGoCanonicalize1K is the Go side of the D-2 hot path for the ~1 KiB bench envelope.
func BenchmarkGoCanonicalize1K(b *testing.B) {
	doc, _, err := producer.Envelope(benchEvent("execution.run-finalization.closed@1", "1", 1))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	for i := 0; i < b.N; i++ {
		if _, _, err := canon.CanonicalizeDigest(doc); err != nil {
			b.Fatal(err)
		}
	}
}
