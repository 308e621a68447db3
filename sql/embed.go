// Package sqlfiles embeds the tern migrations, the files `make migrate` applies, so tests and
// tools run exactly them. The current-definition files under functions/ and triggers/ and the
// role definitions under roles/ are read from the working tree by tools/sqldefs and the tests
// that compare them with a fresh install (docs/migrations.md); no migration includes them. The
// reference release documents are not the kernel's: they live in reference/releases/.
package sqlfiles

import "embed"

// FS holds every migration (top-level NNN_*.sql), each literal SQL written once.
//
//go:embed *.sql
var FS embed.FS
