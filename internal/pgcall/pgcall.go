// Package pgcall holds one Go wrapper per public SQL function of the kernel: a const SQL string
// with explicit casts, a params struct where useful, and a function over the small DBTX
// interface. No other package issues SQL against the kernel.
package pgcall

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what every wrapper needs: a *pgx.Conn, a pgx.Tx or a *pgxpool.Pool.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
