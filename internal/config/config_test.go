package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const secretValue = "0123456789abcdef-very-secret"

func envMap(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// base is a valid production configuration with one HMAC-authenticated HTTP destination.
const base = `
mode = "production"
worker_name = "dispatcher-a"
` + dest

// dest is the destination table alone (mode defaults to production).
const dest = `
[destinations.metering_input_processor]
transport = "http"
url = "https://consumer.internal/deliver"
auth = "hmac"
secret_env = "METERING_SECRET"
`

var baseEnv = map[string]string{"METERING_SECRET": secretValue}

func parse(t *testing.T, text string, env map[string]string) (*Config, error) {
	t.Helper()
	e := map[string]string{}
	for k, v := range baseEnv {
		e[k] = v
	}
	for k, v := range env {
		e[k] = v
	}
	return Parse(text, envMap(e))
}

func TestValidConfigAndDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parse(t, base, nil)
	if err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if cfg.BatchSize != 32 || cfg.Lease != 30*time.Second || !cfg.LeaseRenewal || cfg.RenewFraction != 0.5 ||
		cfg.OutcomeFlushInterval != 20*time.Millisecond {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	d := cfg.Destinations["metering_input_processor"]
	if d.Timeout != 10*time.Second || d.MaxResponseBytes != 1<<20 {
		t.Fatalf("http destination defaults not applied: %+v", d)
	}
	if string(d.Secret.Bytes()) != secretValue {
		t.Fatalf("secret not loaded")
	}
	// Issue 21 item 1 (D-5): claim-ahead of one batch by default; a destination without its own
	// concurrency is bounded by the global one, one with it by its own.
	if cfg.Prefetch != 32 || cfg.DestinationConcurrency("metering_input_processor") != 16 {
		t.Fatalf("prefetch %d, destination concurrency %d", cfg.Prefetch, cfg.DestinationConcurrency("metering_input_processor"))
	}
	cfg, err = parse(t, base+"concurrency = 4\n", nil)
	if err != nil || cfg.DestinationConcurrency("metering_input_processor") != 4 {
		t.Fatalf("destination concurrency = 4: %v", err)
	}
}

// R-DP-6, D-5: every bound refuses to start with a message naming the key, value and range.
func TestEachBoundRejectedWithClearMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, line, want string
	}{
		{"batch_size low", `batch_size = 0`, "batch_size = 0 is out of range [1, 1000]"},
		{"batch_size high", `batch_size = 1001`, "batch_size = 1001 is out of range [1, 1000]"},
		{"concurrency low", `concurrency = 0`, "concurrency = 0 is out of range [1, 16384]"},
		{"concurrency high", `concurrency = 20000`, "concurrency = 20000 is out of range [1, 16384]"},
		{"lease low", `lease = "500ms"`, "lease = 500ms is out of range [1s, 1h0m0s]"},
		{"lease high", `lease = "2h"`, "lease = 2h0m0s is out of range [1s, 1h0m0s]"},
		{"lease as integer (nanoseconds)", `lease = 30`, "lease = 30ns is out of range"},
		{"renew_fraction low", `renew_fraction = 0.05`, "renew_fraction = 0.05 is out of range [0.1, 0.9]"},
		{"renew_fraction high", `renew_fraction = 0.95`, "renew_fraction = 0.95 is out of range [0.1, 0.9]"},
		{"poll_interval low", `poll_interval = "10ms"`, "poll_interval = 10ms is out of range [50ms, 10m0s]"},
		{"poll_interval high", `poll_interval = "11m"`, "poll_interval = 11m0s is out of range [50ms, 10m0s]"},
		{"recovery_interval low", `recovery_interval = "50ms"`, "recovery_interval = 50ms is out of range [100ms, 1h0m0s]"},
		{"recovery_interval high", `recovery_interval = "2h"`, "recovery_interval = 2h0m0s is out of range"},
		{"recovery_batch low", `recovery_batch = 0`, "recovery_batch = 0 is out of range [1, 100000]"},
		{"recovery_batch high", `recovery_batch = 100001`, "recovery_batch = 100001 is out of range [1, 100000]"},
		{"statement_timeout low", `statement_timeout = "10ms"`, "statement_timeout = 10ms is out of range [100ms, 10m0s]"},
		{"statement_timeout high", `statement_timeout = "11m"`, "statement_timeout = 11m0s is out of range"},
		{"statement_timeout vs lease", "lease = \"2s\"\nstatement_timeout = \"2s\"", "statement_timeout = 2s must be shorter than lease = 2s"},
		{"outcome_flush_interval negative", `outcome_flush_interval = "-1ms"`, "outcome_flush_interval = -1ms is out of range [0s, 50ms]"},
		{"outcome_flush_interval high", `outcome_flush_interval = "51ms"`, "outcome_flush_interval = 51ms is out of range [0s, 50ms]"},
		{"shutdown_grace negative", `shutdown_grace = "-1s"`, "shutdown_grace = -1s is out of range [0s, 10m0s]"},
		{"shutdown_grace high", `shutdown_grace = "11m"`, "shutdown_grace = 11m0s is out of range [0s, 10m0s]"},
		{"db_max_conns low", `db_max_conns = 1`, "db_max_conns = 1 is out of range [2, 500]"},
		{"db_max_conns high", `db_max_conns = 501`, "db_max_conns = 501 is out of range [2, 500]"},
		{"stats_interval low", `stats_interval = "100ms"`, "stats_interval = 100ms is out of range [1s, 10m0s]"},
		{"stats_interval high", `stats_interval = "1h"`, "stats_interval = 1h0m0s is out of range [1s, 10m0s]"},
		{"mode", `mode = "staging"`, `mode = "staging": must be "production" or "development"`},
		{"worker_name", `worker_name = "Has Spaces"`, `worker_name = "Has Spaces": must match`},
		{"metrics_address", `metrics_address = "localhost"`, `metrics_address = "localhost": must be host:port`},
		{"metrics_address port", `metrics_address = "127.0.0.1:70000"`, "port must be 0..65535"},
		{"log_level", `log_level = "trace"`, `log_level = "trace": must be debug, info, warn or error`},
		{"database_role", `database_role = "x; DROP"`, `database_role = "x; DROP": must be a plain role name`},
		{"prefetch negative", `prefetch = -1`, "prefetch = -1 is out of range [0, 1000]"},
		{"prefetch high", `prefetch = 1001`, "prefetch = 1001 is out of range [0, 1000]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(t, c.line+"\n"+dest, nil)
			if err == nil {
				t.Fatalf("%s accepted", c.line)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("message %q does not contain %q", err.Error(), c.want)
			}
		})
	}
}

// R-DP-6: destination-level bounds and combinations.
func TestDestinationBoundsRejected(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text, want string
	}{
		{"no destinations", "mode = \"development\"\n", "at least one [destinations.<name>] table is required"},
		{"bad destination name", "mode=\"development\"\n[destinations.Bad]\ntransport=\"http\"\nurl=\"http://x\"\n", "destination name must match"},
		{"missing transport", "mode=\"development\"\n[destinations.d]\n", ".transport is required"},
		{"unknown transport", "mode=\"development\"\n[destinations.d]\ntransport=\"grpc\"\n", `.transport = "grpc": must be inprocess, http, jetstream or custom`},
		{"http without url", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\n", ".url is required for transport http"},
		{"http bad scheme", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"ftp://x/y\"\n", "must be an absolute http:// or https:// URL"},
		{"http credentials in url", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://u:p@x/y\"\n", "credentials in the URL are refused"},
		{"http timeout low", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\ntimeout=\"10ms\"\n", "destinations.d.timeout = 10ms is out of range [100ms, 10m0s]"},
		{"http timeout high", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\ntimeout=\"1h\"\n", "destinations.d.timeout = 1h0m0s is out of range"},
		{"http max_response_bytes", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nmax_response_bytes=10\n", "max_response_bytes = 10 is out of range [1024, 16777216]"},
		{"http auth unknown", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"basic\"\n", `.auth = "basic": must be one of none, hmac, bearer`},
		{"http auth without secret", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"hmac\"\n", `auth = "hmac" needs secret_env or secret_file`},
		{"secret env unset", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"bearer\"\nsecret_env=\"NOPE_UNSET\"\n", "environment variable NOPE_UNSET is not set or empty"},
		{"secret too short", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"bearer\"\nsecret_env=\"SHORT\"\n", "secret is shorter than 16 bytes"},
		{"both secret sources", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"bearer\"\nsecret_env=\"SHORT\"\nsecret_file=\"/x\"\n", "set one of secret_env and secret_file, not both"},
		{"secret file missing", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"bearer\"\nsecret_file=\"/nonexistent/secret\"\n", "secret_file: cannot read /nonexistent/secret"},
		{"inprocess in production", "mode=\"production\"\n[destinations.d]\ntransport=\"inprocess\"\n", `transport = "inprocess" is a development transport, refused in production mode (R-DP-6)`},
		{"unauthenticated http in production", "mode=\"production\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\n", `auth = "none" is refused in production mode`},
		{"jetstream without url", "mode=\"development\"\n[destinations.d]\ntransport=\"jetstream\"\nsubject=\"a.b\"\n", ".nats_url is required for transport jetstream"},
		{"jetstream bad url", "mode=\"development\"\n[destinations.d]\ntransport=\"jetstream\"\nnats_url=\"http://x:4222\"\nsubject=\"a.b\"\n", "must be a nats://, tls://, ws:// or wss:// URL"},
		{"jetstream wildcard subject", "mode=\"development\"\n[destinations.d]\ntransport=\"jetstream\"\nnats_url=\"nats://x:4222\"\nsubject=\"a.*\"\n", `subject = "a.*": must be a literal NATS subject`},
		{"jetstream bad stream", "mode=\"development\"\n[destinations.d]\ntransport=\"jetstream\"\nnats_url=\"nats://x:4222\"\nsubject=\"a.b\"\nstream=\"a.b\"\n", `.stream = "a.b": must match`},
		{"http signature unknown", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"hmac\"\nsecret_env=\"METERING_SECRET\"\nsignature=\"sha512\"\n", `.signature = "sha512": must be one of v1, both, body-sha256`},
		{"http signature without hmac", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nauth=\"bearer\"\nsecret_env=\"METERING_SECRET\"\nsignature=\"both\"\n", `.signature = "both": only for auth = "hmac"`},
		{"destination concurrency negative", "mode=\"development\"\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nconcurrency=-1\n", "destinations.d.concurrency = -1 is out of range [1, concurrency = 16]"},
		{"destination concurrency above the global one", "mode=\"development\"\nconcurrency=8\n[destinations.d]\ntransport=\"http\"\nurl=\"http://x\"\nconcurrency=9\n", "destinations.d.concurrency = 9 is out of range [1, concurrency = 8]"},
		{"jetstream hmac", "mode=\"development\"\n[destinations.d]\ntransport=\"jetstream\"\nnats_url=\"nats://x:4222\"\nsubject=\"a.b\"\nauth=\"hmac\"\nsecret_env=\"METERING_SECRET\"\n", `.auth = "hmac": must be one of none, token`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(t, c.text, map[string]string{"SHORT": "short"})
			if err == nil {
				t.Fatalf("accepted:\n%s", c.text)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("message %q does not contain %q", err.Error(), c.want)
			}
		})
	}
}

// D-5: unknown keys refuse to start, at top level and inside a destination; so do keys that
// do not apply to the destination's transport.
func TestUnknownAndMisplacedKeysRefused(t *testing.T) {
	t.Parallel()
	cases := []struct{ text, want string }{
		{"batchsize = 10\n" + base, "batchsize: unknown key"},
		{base + "retries = 3\n", "destinations.metering_input_processor.retries: unknown key"},
		{base + "subject = \"a.b\"\n", `destinations.metering_input_processor.subject: key does not apply to transport "http"`},
		{"mode=\"development\"\n[destinations.d]\ntransport=\"inprocess\"\ntimeout=\"1s\"\n", `destinations.d.timeout: key does not apply to transport "inprocess"`},
		{"[database]\nurl = \"postgres://x\"\n" + base, "database: unknown key"},
	}
	for _, c := range cases {
		_, err := parse(t, c.text, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want error containing %q, got %v", c.want, err)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	cfg, err := parse(t, base, map[string]string{
		"PGOUTBOX_BATCH_SIZE": "7", "PGOUTBOX_LEASE": "45s", "PGOUTBOX_LEASE_RENEWAL": "false",
		"PGOUTBOX_RENEW_FRACTION": "0.25", "PGOUTBOX_WORKER_NAME": "w-2", "PGOUTBOX_METRICS_ADDRESS": "0.0.0.0:9000",
		"PGOUTBOX_OUTCOME_FLUSH_INTERVAL": "0s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BatchSize != 7 || cfg.Lease != 45*time.Second || cfg.LeaseRenewal || cfg.RenewFraction != 0.25 ||
		cfg.WorkerName != "w-2" || cfg.MetricsAddress != "0.0.0.0:9000" || cfg.OutcomeFlushInterval != 0 {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	// An override is bounded like the file value; an unparseable one names the variable.
	_, err = parse(t, base, map[string]string{"PGOUTBOX_BATCH_SIZE": "0"})
	if err == nil || !strings.Contains(err.Error(), "batch_size = 0 is out of range") {
		t.Fatalf("override not bounded: %v", err)
	}
	_, err = parse(t, base, map[string]string{"PGOUTBOX_LEASE": "forever"})
	if err == nil || !strings.Contains(err.Error(), `PGOUTBOX_LEASE="forever": not a duration`) {
		t.Fatalf("bad override: %v", err)
	}
}

// R-DP-5: secrets never print, whatever the formatting verb.
func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parse(t, `mode = "production"
[destinations.d]
transport = "http"
url = "https://c/x"
auth = "bearer"
secret_file = "`+p+`"
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Destinations["d"]
	if string(d.Secret.Bytes()) != secretValue {
		t.Fatalf("file secret not loaded (trailing newline must be trimmed)")
	}
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", d), fmt.Sprint(d.Secret)} {
		if strings.Contains(s, secretValue) {
			t.Fatalf("secret printed: %s", s)
		}
	}
	// A too-short secret's error does not quote it either.
	_, err = parse(t, base, map[string]string{"METERING_SECRET": "tiny-secret"})
	if err == nil || strings.Contains(err.Error(), "tiny-secret") {
		t.Fatalf("short secret: %v", err)
	}
}

func TestDatabaseURLAndRedaction(t *testing.T) {
	t.Parallel()
	u, err := DatabaseURL(envMap(map[string]string{"DATABASE_URL": "postgres://b", "PGOUTBOX_DATABASE_URL": "postgres://a"}))
	if err != nil || u != "postgres://a" {
		t.Fatalf("PGOUTBOX_DATABASE_URL must win: %q %v", u, err)
	}
	if _, err := DatabaseURL(envMap(nil)); err == nil {
		t.Fatal("missing URL accepted")
	}
	r := RedactURL("postgres://user:hunter2secret@db:5432/x?sslmode=disable&password=other")
	if strings.Contains(r, "hunter2secret") || strings.Contains(r, "other") || !strings.Contains(r, "user") {
		t.Fatalf("not redacted: %s", r)
	}
}

func TestErrorListsAllProblems(t *testing.T) {
	t.Parallel()
	_, err := parse(t, "batch_size = 0\nconcurrency = 0\n"+base, nil)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
}

// The documented example file is a valid configuration (docs/dispatcher.example.toml).
func TestExampleFileIsValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "metering_token")
	if err := os.WriteFile(tok, []byte(secretValue), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/dispatcher.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "/run/secrets/metering_token", tok)
	cfg, err := Parse(text, envMap(map[string]string{"PGOUTBOX_SECRET_CORE_OPERATIONS": secretValue, "PGOUTBOX_NATS_TOKEN": secretValue}))
	if err != nil {
		t.Fatalf("example refused: %v", err)
	}
	if len(cfg.Destinations) != 3 || cfg.Destinations["broker_events"].Stream != "OUTBOX_EVENTS" {
		t.Fatalf("example parsed as %+v", cfg.Destinations)
	}
	def := Defaults()
	if cfg.BatchSize != def.BatchSize || cfg.Lease != def.Lease || cfg.ShutdownGrace != def.ShutdownGrace ||
		cfg.OutcomeFlushInterval != def.OutcomeFlushInterval {
		t.Fatal("the example's documented defaults drifted from Defaults()")
	}
}
