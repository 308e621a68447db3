package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
)

// versionedSpec is spec serving projection version v: the reference version keeps its schema,
// any other version has its own tables in schema <schema>_v<v> (one schema per version, as the
// runbook in docs/projection-versions.md registers them with outbox.register_projection_rows).
func versionedSpec(spec reference.Spec, v int) reference.Spec {
	if v == spec.ProjectionVersion {
		return spec
	}
	spec.Schema = fmt.Sprintf("%s_v%d", spec.Schema, v)
	spec.ProjectionVersion = v
	return spec
}

type rebuildOptions struct {
	buildID, buildToken         string
	projectorURL, projectorRole string
	batch                       int
}

// rebuildReport is what -rebuild prints (one JSON line) when the build has no more sources.
type rebuildReport struct {
	Consumer          string   `json:"consumer"`
	ProjectionName    string   `json:"projectionName"`
	ProjectionVersion int      `json:"projectionVersion"`
	BuildID           string   `json:"buildId"`
	Claimed           int      `json:"claimed"`
	Applied           int      `json:"applied"`
	Skipped           int      `json:"skipped"`
	Refused           []string `json:"refused"`
	Waiting           int      `json:"waiting"`
}

// runRebuild builds o's shadow projection version from the kernel's history (consumer.Rebuild):
// the sources are claimed on a session of the projector role (outbox.claim_rebuild_sources), each
// applied in one transaction of o's database with the shadow's build token, until an empty batch
// (before the freeze: everything so far; after it: the rest of the boundary). Run it again with
// the new token after outbox.freeze_cutover_candidate.
func runRebuild(ctx context.Context, log *slog.Logger, o serveOptions, r rebuildOptions, out io.Writer) error {
	pool, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		return fmt.Errorf("consumer %s: invalid database URL", o.spec.ConsumerName)
	}
	defer pool.Close()
	if o.install {
		if err := o.spec.Install(ctx, pool, o.grantTo); err != nil {
			return err
		}
	}
	cfg := o.spec.ApplyConfig(pool) // a rebuild writes its shadow version through Apply
	cfg.Role, cfg.BuildToken, cfg.Logger = o.role, r.buildToken, log
	kit, err := consumer.New(ctx, cfg)
	if err != nil {
		return err
	}
	claimer, err := pgx.Connect(ctx, r.projectorURL)
	if err != nil {
		return fmt.Errorf("projector session: %w", err)
	}
	defer claimer.Close(context.Background())
	if r.projectorRole != "" {
		if _, err := claimer.Exec(ctx, "SET ROLE "+pgx.Identifier{r.projectorRole}.Sanitize()); err != nil {
			return fmt.Errorf("projector session: %w", err)
		}
	}
	st, err := kit.Rebuild(ctx, claimer, r.buildID, r.batch)
	if err != nil {
		return fmt.Errorf("rebuild %s@%d: %w", o.spec.ProjectionName, o.spec.ProjectionVersion, err)
	}
	rep := rebuildReport{Consumer: o.spec.ConsumerName, ProjectionName: o.spec.ProjectionName, ProjectionVersion: o.spec.ProjectionVersion,
		BuildID: r.buildID, Claimed: st.Claimed, Applied: st.Applied, Skipped: st.Skipped, Refused: append([]string{}, st.Refused...), Waiting: st.Waiting}
	return json.NewEncoder(out).Encode(rep)
}
