// Package bench holds the project's benchmarks against real PostgreSQL (fsync on). They are
// built only with the "bench" tag so that `make test` never runs them:
//
//	make bench   # go test -tags bench -run '^$' -bench . -benchtime ... ./bench/
//
// Numbers are reported as Go benchmark metrics (ns/op plus custom units such as events/s or
// ratio) and summarized in docs/performance.md.
//
// The side by side with River (SPEC §12a P-1, P-2) is not a Go benchmark: bench/outboxbench
// (pgoutbox, build tag "bench") and bench/river/cmd/riverbench (River, in a Go module of its
// own) each print one RESULT line per run, and scripts/bench-river.sh alternates them on one
// cluster (make bench, make bench-river).
package bench
