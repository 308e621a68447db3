// Package sqlfiles embeds the tern migrations and the function, trigger and role files they
// include, so tests and tools run exactly the files `make migrate` applies. The reference
// release documents are not the kernel's: they live in reference/releases/.
package sqlfiles

import "embed"

// FS holds every migration (top-level NNN_*.sql) and the templates under functions/, triggers/
// and roles/.
//
//go:embed *.sql all:functions all:triggers all:roles
var FS embed.FS
