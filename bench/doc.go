// Package bench holds the project's benchmarks against real PostgreSQL (fsync on). They are
// built only with the "bench" tag so that `make test` never runs them:
//
//	make bench   # go test -tags bench -run '^$' -bench . -benchtime ... ./bench/
//
// Numbers are reported as Go benchmark metrics (ns/op plus custom units such as events/s or
// ratio) and summarized in docs/performance.md.
package bench
