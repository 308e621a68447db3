// Package sqlfiles embeds the tern migrations and the function, trigger, role and release files
// they include, so tests and tools run exactly the files `make migrate` applies.
package sqlfiles

import "embed"

// FS holds every migration (top-level NNN_*.sql) and the templates under functions/, triggers/,
// roles/ and the reference releases under releases/.
//
//go:embed *.sql all:functions all:triggers all:roles all:releases
var FS embed.FS
