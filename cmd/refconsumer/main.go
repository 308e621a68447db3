// Command refconsumer serves the four reference consumers (SPEC R-CO-6) over the HTTP wire
// contract on one listen address, one path per consumer: POST /consumers/<consumer_name>.
// Each consumer has its own database URL (migrated with the kernel's migrations, so it has the
// inbox schema) and its own HMAC secret or bearer token. GET /healthz answers while the process
// runs; GET /readyz answers 200 once every consumer's database is reachable and its domain
// schema installed. When PostgreSQL goes away requests answer 503 database_unavailable while a
// monitor re-checks the database with backoff.
//
// A consumer without a secret or token makes the process refuse to start (unless
// -insecure-no-auth). Secrets and payloads are never logged.
//
// Flags and environment variables (refconsumer -h): docs/transport-http.md#cmdrefconsumer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oceanway/pgoutbox/reference"
)

type multiFlag map[string]string

func (m multiFlag) String() string { return "" }

func (m multiFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	m[name] = val
	return nil
}

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func envName(consumer, suffix string) string {
	return "REFCONSUMER_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_", "@", "_").Replace(consumer)) + "_" + suffix
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "refconsumer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("refconsumer", flag.ContinueOnError)
	var names []string
	for _, s := range reference.All() {
		names = append(names, s.ConsumerName)
	}
	listen := fs.String("listen", env("REFCONSUMER_LISTEN", "127.0.0.1:8090"), "listen address")
	consumers := fs.String("consumers", env("REFCONSUMER_CONSUMERS", strings.Join(names, ",")), "consumers to serve")
	defaultDB := fs.String("database-url", env("REFCONSUMER_DATABASE_URL", ""), "database of every consumer without its own -db")
	dbs, secrets, tokens, roles := multiFlag{}, multiFlag{}, multiFlag{}, multiFlag{}
	fs.Var(dbs, "db", "NAME=URL database of one consumer (repeatable)")
	fs.Var(secrets, "secret", "NAME=SECRET HMAC secret of one consumer (repeatable; prefer the environment)")
	fs.Var(tokens, "token", "NAME=TOKEN bearer token of one consumer (repeatable; prefer the environment)")
	role := fs.String("role", env("REFCONSUMER_ROLE", ""), "role to SET LOCAL in every transaction")
	fs.Var(roles, "consumer-role", "NAME=ROLE role of one consumer, instead of -role (repeatable; the role inbox.bind_consumer_role bound NAME to)")
	installDefault, _ := strconv.ParseBool(env("REFCONSUMER_INSTALL_SCHEMA", "true"))
	install := fs.Bool("install-schema", installDefault, "create the consumers' domain schemas at start")
	grantTo := fs.String("grant-to", env("REFCONSUMER_GRANT_TO", ""), "role granted the domain schemas (default: -role)")
	maxConcDefault, _ := strconv.Atoi(env("REFCONSUMER_MAX_CONCURRENT", "64"))
	maxConc := fs.Int("max-concurrent", maxConcDefault, "deliveries in progress per consumer before 429")
	insecure := fs.Bool("insecure-no-auth", false, "accept unauthenticated requests (development only)")
	maxBody := fs.Int64("max-body-bytes", 4<<20, "largest request body accepted (413 above)")
	maxUnauth := fs.Int("max-unauthenticated-reads", 4, "request bodies read at once before their HMAC signature is checked")
	window := fs.Duration("signature-window", 5*time.Minute, "a signature whose timestamp is further from now is stale; accepted signatures are remembered this long (replays refused)")
	bodyOnly := fs.Bool("accept-body-only-signature", false, "also accept the obsolete replayable body-only signature (migration only)")
	oneTrip := fs.Bool("one-round-trip", true, "recorder consumers apply through consumer.Config.Mutate: one database round trip per delivery (false: Apply in a transaction)")
	headerTimeout := fs.Duration("read-header-timeout", 5*time.Second, "time a client has to send the request line and headers")
	unauthGrace := fs.Duration("unauthenticated-read-grace", 2*time.Second, "body-only signature: time allowed for a body read before authentication, on top of the minimum rate")
	unauthRate := fs.Int64("min-unauthenticated-body-rate", 64<<10, "body-only signature: minimum bytes/s of a body read before authentication")
	unauthStall := fs.Duration("unauthenticated-stall", 250*time.Millisecond, "body-only signature: a read that received nothing this long loses its slot to a waiting request")
	logLevel := fs.String("log-level", env("REFCONSUMER_LOG_LEVEL", "info"), "debug|info|warn|error")
	// projection versions (SPEC R-PV-1..R-PV-3, docs/projection-versions.md runbook)
	versions, dualVersions, dualTokens := multiFlag{}, multiFlag{}, multiFlag{}
	fs.Var(versions, "projection-version", "NAME=V serve (or rebuild) NAME's projection at version V, its tables in schema <schema>_v<V> (repeatable; default: the reference version)")
	fs.Var(dualVersions, "dual-apply", "NAME=V also apply every delivery of NAME to projection version V in the same inbox transaction (cutover dual-apply; repeatable)")
	fs.Var(dualTokens, "dual-apply-token", "NAME=TOKEN live build token of NAME's -dual-apply version while it is a shadow (prefer REFCONSUMER_<NAME>_DUAL_APPLY_TOKEN)")
	rebuild := fs.String("rebuild", "", "NAME: rebuild NAME's shadow version (-projection-version) from the kernel's history for -build-id/-build-token, print the counts and exit")
	buildID := fs.String("build-id", env("REFCONSUMER_BUILD_ID", ""), "-rebuild: the build id of outbox.start_shadow_build")
	buildToken := fs.String("build-token", env("REFCONSUMER_BUILD_TOKEN", ""), "-rebuild: the build's live token (after a freeze: the new one; prefer REFCONSUMER_BUILD_TOKEN)")
	projectorURL := fs.String("projector-url", env("REFCONSUMER_PROJECTOR_URL", ""), "-rebuild: database URL of the outbox_projector session that claims the sources (default: the consumer's database)")
	projectorRole := fs.String("projector-role", env("REFCONSUMER_PROJECTOR_ROLE", ""), "-rebuild: role to SET on the projector session (e.g. outbox_projector)")
	rebuildBatch := fs.Int("rebuild-batch", 100, "-rebuild: sources per claim (1..1000)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *maxConc < 1 || *maxConc > 10000 {
		return fmt.Errorf("-max-concurrent %d out of range 1..10000", *maxConc)
	}
	if *maxBody < 1024 || *maxBody > 64<<20 {
		return fmt.Errorf("-max-body-bytes %d out of range 1024..%d", *maxBody, 64<<20)
	}
	if *maxUnauth < 1 || *maxUnauth > 1024 {
		return fmt.Errorf("-max-unauthenticated-reads %d out of range 1..1024", *maxUnauth)
	}
	if *headerTimeout < 100*time.Millisecond || *headerTimeout > time.Minute {
		return fmt.Errorf("-read-header-timeout %s out of range 100ms..1m", *headerTimeout)
	}
	if *unauthGrace < 100*time.Millisecond || *unauthGrace > time.Minute || *unauthRate < 1024 ||
		*unauthStall < 10*time.Millisecond || *unauthStall > time.Minute {
		return errors.New("-unauthenticated-read-grace (100ms..1m), -min-unauthenticated-body-rate (>= 1024) or -unauthenticated-stall (10ms..1m) out of range")
	}
	if *window < time.Second || *window > time.Hour {
		return fmt.Errorf("-signature-window %s out of range 1s..1h", *window)
	}
	if *grantTo == "" {
		*grantTo = *role
	}
	if *rebuild != "" {
		if *buildID == "" || *buildToken == "" {
			return errors.New("-rebuild needs -build-id and -build-token (or REFCONSUMER_BUILD_ID / REFCONSUMER_BUILD_TOKEN)")
		}
		if *rebuildBatch < 1 || *rebuildBatch > 1000 {
			return fmt.Errorf("-rebuild-batch %d out of range 1..1000", *rebuildBatch)
		}
		*consumers = *rebuild
	}

	var opts []serveOptions
	for _, name := range strings.Split(*consumers, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		spec, ok := reference.Lookup(name)
		if !ok {
			return fmt.Errorf("unknown consumer %q (known: %s)", name, strings.Join(names, ", "))
		}
		if v, ok := versions[name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("-projection-version %s=%s: want a version >= 1", name, v)
			}
			spec = versionedSpec(spec, n)
		}
		o := serveOptions{spec: spec, role: *role, grantTo: *grantTo, install: *install,
			maxConcurrent: *maxConc, insecure: *insecure, maxBodyBytes: *maxBody, maxUnauthReads: *maxUnauth,
			signatureWindow: *window, acceptBodyOnly: *bodyOnly, unauthGrace: *unauthGrace,
			unauthRate: *unauthRate, unauthStall: *unauthStall, oneRoundTrip: *oneTrip}
		if v, ok := dualVersions[name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n == spec.ProjectionVersion || spec.ProjectionName == "" {
				return fmt.Errorf("-dual-apply %s=%s: want a projection version >= 1 other than the served %d", name, v, spec.ProjectionVersion)
			}
			base, _ := reference.Lookup(name)
			d := versionedSpec(base, n)
			o.dual, o.oneRoundTrip = &d, false // dual-apply runs on the Apply path
			o.dualToken = firstNonEmpty(dualTokens[name], os.Getenv(envName(name, "DUAL_APPLY_TOKEN")))
		} else if _, ok := dualTokens[name]; ok {
			return fmt.Errorf("-dual-apply-token %s without -dual-apply %s=V", name, name)
		}
		if r := firstNonEmpty(roles[name], os.Getenv(envName(name, "ROLE"))); r != "" {
			o.role, o.grantTo = r, r
		}
		o.dbURL = firstNonEmpty(dbs[name], os.Getenv(envName(name, "DATABASE_URL")), *defaultDB)
		if o.dbURL == "" {
			return fmt.Errorf("consumer %s: no database URL (-db %s=URL, %s or -database-url)", name, name, envName(name, "DATABASE_URL"))
		}
		o.secret = firstNonEmpty(secrets[name], os.Getenv(envName(name, "HMAC_SECRET")))
		o.token = firstNonEmpty(tokens[name], os.Getenv(envName(name, "BEARER_TOKEN")))
		if o.secret == "" && o.token == "" && !*insecure && *rebuild == "" {
			return fmt.Errorf("consumer %s: no HMAC secret or bearer token (%s / %s); refusing to serve unauthenticated",
				name, envName(name, "HMAC_SECRET"), envName(name, "BEARER_TOKEN"))
		}
		opts = append(opts, o)
	}
	if len(opts) == 0 {
		return errors.New("no consumers to serve")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *rebuild != "" {
		return runRebuild(ctx, log, opts[0], rebuildOptions{buildID: *buildID, buildToken: *buildToken,
			projectorURL: firstNonEmpty(*projectorURL, opts[0].dbURL), projectorRole: *projectorRole, batch: *rebuildBatch}, os.Stdout)
	}
	srv, err := newServer(ctx, log, opts)
	if err != nil {
		return err
	}
	defer srv.close()

	hs := &http.Server{Addr: *listen, Handler: srv.mux(), ReadHeaderTimeout: *headerTimeout,
		ReadTimeout: 60 * time.Second, WriteTimeout: 120 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	log.Info("refconsumer listening", "listen", *listen, "consumers", len(opts))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("refconsumer shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
