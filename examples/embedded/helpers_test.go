package embedded_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func mustPool(t *testing.T, ctx context.Context, pc *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
