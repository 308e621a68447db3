// Package config loads the dispatcher's configuration (SPEC D-5, R-DP-6): one TOML file plus
// PGOUTBOX_* environment overrides. Every value has a default and a bound; an unknown key, a
// value out of range, a key that does not apply to a destination's transport, or an unsafe
// combination (the in-process transport or an unauthenticated transport in production mode)
// refuses to start with a message naming the key, the value and the bound.
//
// The reference of every key is docs/dispatcher.md; an example is docs/dispatcher.example.toml.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Modes (R-DP-6).
const (
	ModeProduction  = "production"
	ModeDevelopment = "development"
)

// Transports (R-DP-2).
const (
	TransportInProcess = "inprocess"
	TransportHTTP      = "http"
	TransportJetStream = "jetstream"
	// TransportCustom: the program that embeds the dispatcher supplies the destination's
	// transport (dispatcher.Options.Transports); the file configures nothing else for it.
	TransportCustom = "custom"
)

// Authentication schemes of the network transports.
const (
	AuthNone   = "none"
	AuthHMAC   = "hmac"   // http: HMAC-SHA256 of the body with a shared secret
	AuthBearer = "bearer" // http: Authorization: Bearer <token>
	AuthToken  = "token"  // jetstream: NATS token authentication
)

// Signature forms of an http destination with auth = "hmac" (docs/transport-http.md,
// "Upgrading the signature").
const (
	SignatureV1         = "v1"          // Pgoutbox-Signature: t=…,v1=… (default)
	SignatureBoth       = "both"        // Pgoutbox-Signature: sha256=… (body-only) and Pgoutbox-Signature-V1: t=…,v1=…
	SignatureBodySHA256 = "body-sha256" // Pgoutbox-Signature: sha256=… only (a consumer that knows no other form)
)

// EnvPrefix prefixes every environment override (PGOUTBOX_BATCH_SIZE, …).
const EnvPrefix = "PGOUTBOX_"

// Config is the dispatcher's whole configuration.
type Config struct {
	Mode             string                 `toml:"mode"`
	WorkerName       string                 `toml:"worker_name"`
	BatchSize        int                    `toml:"batch_size"`
	Concurrency      int                    `toml:"concurrency"`
	Prefetch         int                    `toml:"prefetch"`
	Lease            time.Duration          `toml:"lease"`
	LeaseRenewal     bool                   `toml:"lease_renewal"`
	RenewFraction    float64                `toml:"renew_fraction"`
	PollInterval     time.Duration          `toml:"poll_interval"`
	WakeCoalesce     time.Duration          `toml:"wake_coalesce"`
	RecoveryInterval time.Duration          `toml:"recovery_interval"`
	RecoveryBatch    int                    `toml:"recovery_batch"`
	StatementTimeout time.Duration          `toml:"statement_timeout"`
	ShutdownGrace    time.Duration          `toml:"shutdown_grace"`
	DBMaxConns       int                    `toml:"db_max_conns"`
	DatabaseRole     string                 `toml:"database_role"`
	MetricsAddress   string                 `toml:"metrics_address"`
	StatsInterval    time.Duration          `toml:"stats_interval"`
	LogLevel         string                 `toml:"log_level"`
	Destinations     map[string]Destination `toml:"destinations"`

	// OutcomeFlushInterval bounds how long a finished delivery's outcome waits for others to
	// share one ack_deliveries / retry_deliveries / quarantine_deliveries call (R-AK-9); 0
	// records every outcome with its own call.
	OutcomeFlushInterval time.Duration `toml:"outcome_flush_interval"`
}

// Destination is the transport of one destination.
type Destination struct {
	Transport string `toml:"transport"`
	// http
	URL              string `toml:"url"`
	MaxResponseBytes int    `toml:"max_response_bytes"`
	// Signature (auth = "hmac"): which signature forms a request carries (SignatureV1 default;
	// SignatureBoth and SignatureBodySHA256 only for the upgrade window of docs/transport-http.md).
	Signature string `toml:"signature"`
	// jetstream
	NATSURL string `toml:"nats_url"`
	Subject string `toml:"subject"`
	Stream  string `toml:"stream"`
	// Concurrency bounds this destination's deliveries in the transport at once (0: only the
	// global concurrency bounds them).
	Concurrency int `toml:"concurrency"`
	// http and jetstream
	Timeout    time.Duration `toml:"timeout"`
	Auth       string        `toml:"auth"`
	SecretEnv  string        `toml:"secret_env"`
	SecretFile string        `toml:"secret_file"`

	// Secret is loaded from SecretEnv or SecretFile; it never prints.
	Secret Secret `toml:"-"`
}

// Secret holds a credential. Its String, GoString, MarshalText and slog LogValue are redacted.
type Secret struct{ b []byte }

// NewSecret wraps b (used by tests and by Load).
func NewSecret(b []byte) Secret { return Secret{b: append([]byte(nil), b...)} }

// Bytes returns the secret's bytes (for signing only).
func (s Secret) Bytes() []byte { return s.b }

// Empty reports whether no secret is set.
func (s Secret) Empty() bool { return len(s.b) == 0 }

func (s Secret) String() string   { return "[REDACTED]" }
func (s Secret) GoString() string { return "[REDACTED]" }

// MarshalText keeps secrets out of any encoded form.
func (s Secret) MarshalText() ([]byte, error) { return []byte("[REDACTED]"), nil }

// Bounds of every numeric and duration key (documented in docs/dispatcher.md).
var (
	BatchSizeBounds        = intBounds{1, 1000}
	ConcurrencyBounds      = intBounds{1, 16384}
	PrefetchBounds         = intBounds{0, 1000}
	RecoveryBatchBounds    = intBounds{1, 100000}
	DBMaxConnsBounds       = intBounds{2, 500}
	MaxResponseBytesBounds = intBounds{1 << 10, 16 << 20}
	RenewFractionBounds    = floatBounds{0.1, 0.9}
	LeaseBounds            = durBounds{time.Second, time.Hour}
	PollIntervalBounds     = durBounds{50 * time.Millisecond, 10 * time.Minute}
	WakeCoalesceBounds     = durBounds{0, time.Second}
	RecoveryIntervalBounds = durBounds{100 * time.Millisecond, time.Hour}
	StatementTimeoutBounds = durBounds{100 * time.Millisecond, 10 * time.Minute}
	OutcomeFlushBounds     = durBounds{0, 50 * time.Millisecond}
	ShutdownGraceBounds    = durBounds{0, 10 * time.Minute}
	StatsIntervalBounds    = durBounds{time.Second, 10 * time.Minute}
	TimeoutBounds          = durBounds{100 * time.Millisecond, 10 * time.Minute}
	MaxDestinations        = 64
	MinSecretBytes         = 16
)

type intBounds struct{ min, max int }
type floatBounds struct{ min, max float64 }
type durBounds struct{ min, max time.Duration }

// Defaults returns the configuration used for every key the file and the environment leave out.
func Defaults() Config {
	host, _ := os.Hostname()
	worker := sanitizeWorker(fmt.Sprintf("%s-%d", host, os.Getpid()))
	return Config{
		Mode:             ModeProduction,
		WorkerName:       worker,
		BatchSize:        32,
		Concurrency:      16,
		Prefetch:         32,
		Lease:            30 * time.Second,
		LeaseRenewal:     true,
		RenewFraction:    0.5,
		PollInterval:     time.Second,
		WakeCoalesce:     25 * time.Millisecond,
		RecoveryInterval: 5 * time.Second,
		RecoveryBatch:    1000,
		StatementTimeout: 5 * time.Second,
		ShutdownGrace:    25 * time.Second,
		DBMaxConns:       10,
		MetricsAddress:   "127.0.0.1:9464",
		StatsInterval:    10 * time.Second,
		LogLevel:         "info",

		OutcomeFlushInterval: 20 * time.Millisecond,
	}
}

func destinationDefaults(transport string) Destination {
	d := Destination{Transport: transport, Auth: AuthNone}
	switch transport {
	case TransportHTTP:
		d.Timeout = 10 * time.Second
		d.MaxResponseBytes = 1 << 20
		d.Signature = SignatureV1
	case TransportJetStream:
		d.Timeout = 5 * time.Second
	}
	return d
}

var (
	literalRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]*$`)       // SPEC D-4
	workerRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]{0,127}$`) // the kernel's literal rule (claim_deliveries)
	roleRE     = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	streamRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	subjTokRE  = regexp.MustCompile(`^[^\s.*>]+$`)
	workerSafe = regexp.MustCompile(`[^a-z0-9._@-]`)
)

func sanitizeWorker(s string) string {
	s = workerSafe.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.TrimLeft(s, "-._@")
	if len(s) > 128 {
		s = s[:128]
	}
	if s == "" {
		s = "dispatcher"
	}
	return s
}

// Env looks up an environment variable (os.LookupEnv in production, a map in tests).
type Env func(key string) (string, bool)

// Load reads the TOML file at path, applies PGOUTBOX_* overrides from env, loads the secrets
// named by the destinations and validates everything. It returns every violation at once.
func Load(path string, env Env) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(string(b), env)
}

// Parse is Load on the file's text.
func Parse(text string, env Env) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	cfg := Defaults()
	// Destinations are decoded as primitives so that each gets its transport's defaults first.
	var raw struct {
		Config
		Destinations map[string]toml.Primitive `toml:"destinations"`
	}
	raw.Config = cfg
	md, err := toml.Decode(text, &raw)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg = raw.Config
	var errs []error
	cfg.Destinations = make(map[string]Destination, len(raw.Destinations))
	names := make([]string, 0, len(raw.Destinations))
	for name := range raw.Destinations {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prim := raw.Destinations[name]
		var probe struct {
			Transport string `toml:"transport"`
		}
		if err := md.PrimitiveDecode(prim, &probe); err != nil {
			errs = append(errs, fmt.Errorf("destinations.%s: %w", name, err))
			continue
		}
		d := destinationDefaults(probe.Transport)
		if err := md.PrimitiveDecode(prim, &d); err != nil {
			errs = append(errs, fmt.Errorf("destinations.%s: %w", name, err))
			continue
		}
		for _, k := range destinationKeysNotApplying(probe.Transport) {
			if md.IsDefined("destinations", name, k) {
				errs = append(errs, fmt.Errorf("destinations.%s.%s: key does not apply to transport %q", name, k, probe.Transport))
			}
		}
		cfg.Destinations[name] = d
	}
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("%s: unknown key", k.String()))
	}
	errs = append(errs, applyEnv(&cfg, env)...)
	if len(errs) == 0 {
		errs = append(errs, cfg.loadSecrets(env)...)
		errs = append(errs, cfg.Validate()...)
	}
	if len(errs) > 0 {
		return nil, &Error{Problems: errs}
	}
	return &cfg, nil
}

// DestinationConcurrency is how many deliveries of destination name may be in its transport at
// once: its own concurrency when set, otherwise the global one.
func (c *Config) DestinationConcurrency(name string) int {
	if n := c.Destinations[name].Concurrency; n > 0 {
		return min(n, c.Concurrency)
	}
	return c.Concurrency
}

// Error lists every problem found; the dispatcher refuses to start on any.
type Error struct{ Problems []error }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config refused")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() []error { return e.Problems }

func destinationKeysNotApplying(transport string) []string {
	httpKeys := []string{"url", "max_response_bytes", "signature"}
	jsKeys := []string{"nats_url", "subject", "stream"}
	netKeys := []string{"timeout", "auth", "secret_env", "secret_file"}
	switch transport {
	case TransportHTTP:
		return jsKeys
	case TransportJetStream:
		return httpKeys
	case TransportInProcess, TransportCustom:
		return append(append(httpKeys, jsKeys...), netKeys...)
	}
	return nil
}

// applyEnv overrides top-level keys from PGOUTBOX_<KEY> (upper-case TOML key). Destinations are
// configured in the file only; their secrets come from the variables or files they name.
func applyEnv(cfg *Config, env Env) []error {
	var errs []error
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("toml")
		if key == "" || key == "destinations" {
			continue
		}
		name := EnvPrefix + strings.ToUpper(key)
		s, ok := env(name)
		if !ok {
			continue
		}
		fv := v.Field(i)
		switch fv.Interface().(type) {
		case time.Duration:
			d, err := time.ParseDuration(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a duration (e.g. 30s, 500ms)", name, s))
				continue
			}
			fv.SetInt(int64(d))
		case int:
			n, err := strconv.Atoi(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not an integer", name, s))
				continue
			}
			fv.SetInt(int64(n))
		case float64:
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a number", name, s))
				continue
			}
			fv.SetFloat(x)
		case bool:
			bv, err := strconv.ParseBool(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a boolean (true/false)", name, s))
				continue
			}
			fv.SetBool(bv)
		case string:
			fv.SetString(s)
		}
	}
	return errs
}

func (c *Config) loadSecrets(env Env) []error {
	var errs []error
	for _, name := range c.DestinationNames() {
		d := c.Destinations[name]
		if d.Auth == AuthNone || d.Auth == "" {
			continue
		}
		key := "destinations." + name
		switch {
		case d.SecretEnv != "" && d.SecretFile != "":
			errs = append(errs, fmt.Errorf("%s: set one of secret_env and secret_file, not both", key))
			continue
		case d.SecretEnv != "":
			if !envNameRE.MatchString(d.SecretEnv) {
				errs = append(errs, fmt.Errorf("%s.secret_env = %q: not an environment variable name", key, d.SecretEnv))
				continue
			}
			s, ok := env(d.SecretEnv)
			if !ok || s == "" {
				errs = append(errs, fmt.Errorf("%s.secret_env: environment variable %s is not set or empty", key, d.SecretEnv))
				continue
			}
			d.Secret = NewSecret([]byte(s))
		case d.SecretFile != "":
			b, err := os.ReadFile(d.SecretFile)
			if err != nil {
				// The path is not secret; the content is never printed.
				errs = append(errs, fmt.Errorf("%s.secret_file: cannot read %s: %v", key, d.SecretFile, errors.Unwrap(err)))
				continue
			}
			d.Secret = NewSecret([]byte(strings.TrimRight(string(b), "\r\n")))
		default:
			errs = append(errs, fmt.Errorf("%s: auth = %q needs secret_env or secret_file", key, d.Auth))
			continue
		}
		if len(d.Secret.Bytes()) < MinSecretBytes {
			errs = append(errs, fmt.Errorf("%s: secret is shorter than %d bytes", key, MinSecretBytes))
		}
		c.Destinations[name] = d
	}
	return errs
}

// DestinationNames returns the configured destinations, sorted.
func (c *Config) DestinationNames() []string {
	names := make([]string, 0, len(c.Destinations))
	for n := range c.Destinations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate checks every bound and combination; it returns all violations.
func (c *Config) Validate() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	checkInt := func(key string, v int, b intBounds) {
		if v < b.min || v > b.max {
			add("%s = %d is out of range [%d, %d]", key, v, b.min, b.max)
		}
	}
	checkDur := func(key string, v time.Duration, b durBounds) {
		if v < b.min || v > b.max {
			add("%s = %s is out of range [%s, %s] (write durations as strings, e.g. \"30s\")", key, v, b.min, b.max)
		}
	}

	switch c.Mode {
	case ModeProduction, ModeDevelopment:
	default:
		add("mode = %q: must be %q or %q", c.Mode, ModeProduction, ModeDevelopment)
	}
	if !workerRE.MatchString(c.WorkerName) {
		add("worker_name = %q: must match %s", c.WorkerName, workerRE)
	}
	checkInt("batch_size", c.BatchSize, BatchSizeBounds)
	checkInt("concurrency", c.Concurrency, ConcurrencyBounds)
	checkInt("prefetch", c.Prefetch, PrefetchBounds)
	checkInt("recovery_batch", c.RecoveryBatch, RecoveryBatchBounds)
	checkInt("db_max_conns", c.DBMaxConns, DBMaxConnsBounds)
	checkDur("lease", c.Lease, LeaseBounds)
	checkDur("poll_interval", c.PollInterval, PollIntervalBounds)
	checkDur("wake_coalesce", c.WakeCoalesce, WakeCoalesceBounds)
	checkDur("recovery_interval", c.RecoveryInterval, RecoveryIntervalBounds)
	checkDur("statement_timeout", c.StatementTimeout, StatementTimeoutBounds)
	checkDur("outcome_flush_interval", c.OutcomeFlushInterval, OutcomeFlushBounds)
	checkDur("shutdown_grace", c.ShutdownGrace, ShutdownGraceBounds)
	checkDur("stats_interval", c.StatsInterval, StatsIntervalBounds)
	if c.RenewFraction < RenewFractionBounds.min || c.RenewFraction > RenewFractionBounds.max || c.RenewFraction != c.RenewFraction {
		add("renew_fraction = %g is out of range [%g, %g]", c.RenewFraction, RenewFractionBounds.min, RenewFractionBounds.max)
	}
	if c.StatementTimeout >= c.Lease && LeaseBounds.min <= c.Lease {
		add("statement_timeout = %s must be shorter than lease = %s", c.StatementTimeout, c.Lease)
	}
	if c.DatabaseRole != "" && !roleRE.MatchString(c.DatabaseRole) {
		add("database_role = %q: must be a plain role name matching %s", c.DatabaseRole, roleRE)
	}
	if host, port, err := net.SplitHostPort(c.MetricsAddress); err != nil {
		add("metrics_address = %q: must be host:port (e.g. 127.0.0.1:9464)", c.MetricsAddress)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		add("metrics_address = %q: port must be 0..65535", c.MetricsAddress)
	} else {
		_ = host
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("log_level = %q: must be debug, info, warn or error", c.LogLevel)
	}

	if len(c.Destinations) == 0 {
		add("destinations: at least one [destinations.<name>] table is required")
	}
	if len(c.Destinations) > MaxDestinations {
		add("destinations: %d configured, at most %d", len(c.Destinations), MaxDestinations)
	}
	for _, name := range c.DestinationNames() {
		errs = append(errs, c.validateDestination(name, c.Destinations[name])...)
	}
	return errs
}

func (c *Config) validateDestination(name string, d Destination) []error {
	var errs []error
	key := "destinations." + name
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(key+format, a...)) }
	if !literalRE.MatchString(name) || len(name) > 128 {
		add(": destination name must match %s (exact literal, SPEC D-4)", literalRE)
	}
	if d.Concurrency < 0 || d.Concurrency > max(c.Concurrency, 1) {
		add(".concurrency = %d is out of range [1, concurrency = %d] (0 or absent: only the global bound)", d.Concurrency, c.Concurrency)
	}
	network := func(auths ...string) {
		if d.Timeout < TimeoutBounds.min || d.Timeout > TimeoutBounds.max {
			add(".timeout = %s is out of range [%s, %s]", d.Timeout, TimeoutBounds.min, TimeoutBounds.max)
		}
		ok := d.Auth == AuthNone
		for _, a := range auths {
			ok = ok || d.Auth == a
		}
		if !ok {
			add(".auth = %q: must be one of %s for transport %s", d.Auth, strings.Join(append([]string{AuthNone}, auths...), ", "), d.Transport)
		}
		if d.Auth == AuthNone && (d.SecretEnv != "" || d.SecretFile != "") {
			add(": secret_env/secret_file set but auth = \"none\"")
		}
		if d.Auth == AuthNone && c.Mode == ModeProduction {
			add(": auth = \"none\" is refused in production mode (R-DP-6)")
		}
	}
	switch d.Transport {
	case TransportInProcess:
		if c.Mode == ModeProduction {
			add(".transport = \"inprocess\" is a development transport, refused in production mode (R-DP-6)")
		}
	case TransportCustom:
		// Supplied by the embedding program; dispatcher.New refuses a destination without one.
	case TransportHTTP:
		u, err := url.Parse(d.URL)
		switch {
		case d.URL == "":
			add(".url is required for transport http")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add(".url = %q: must be an absolute http:// or https:// URL", redactURL(d.URL))
		case u.User != nil:
			add(".url: credentials in the URL are refused; use auth with secret_env or secret_file")
		case u.Fragment != "":
			add(".url: a fragment is not allowed")
		}
		if d.MaxResponseBytes < MaxResponseBytesBounds.min || d.MaxResponseBytes > MaxResponseBytesBounds.max {
			add(".max_response_bytes = %d is out of range [%d, %d]", d.MaxResponseBytes, MaxResponseBytesBounds.min, MaxResponseBytesBounds.max)
		}
		network(AuthHMAC, AuthBearer)
		switch {
		case d.Signature != "" && d.Signature != SignatureV1 && d.Signature != SignatureBoth && d.Signature != SignatureBodySHA256:
			add(".signature = %q: must be one of %s, %s, %s", d.Signature, SignatureV1, SignatureBoth, SignatureBodySHA256)
		case d.Signature != "" && d.Signature != SignatureV1 && d.Auth != AuthHMAC:
			add(".signature = %q: only for auth = \"hmac\"", d.Signature)
		}
	case TransportJetStream:
		u, err := url.Parse(d.NATSURL)
		switch {
		case d.NATSURL == "":
			add(".nats_url is required for transport jetstream")
		case err != nil || u.Host == "" || !(u.Scheme == "nats" || u.Scheme == "tls" || u.Scheme == "ws" || u.Scheme == "wss"):
			add(".nats_url = %q: must be a nats://, tls://, ws:// or wss:// URL", redactURL(d.NATSURL))
		case u.User != nil:
			add(".nats_url: credentials in the URL are refused; use auth = \"token\" with secret_env or secret_file")
		}
		if !validSubject(d.Subject) {
			add(".subject = %q: must be a literal NATS subject (dot-separated tokens, no wildcards, at most 255 bytes)", d.Subject)
		}
		if d.Stream != "" && !streamRE.MatchString(d.Stream) {
			add(".stream = %q: must match %s", d.Stream, streamRE)
		}
		network(AuthToken)
	case "":
		add(".transport is required (%s, %s, %s or %s)", TransportInProcess, TransportHTTP, TransportJetStream, TransportCustom)
	default:
		add(".transport = %q: must be %s, %s, %s or %s", d.Transport, TransportInProcess, TransportHTTP, TransportJetStream, TransportCustom)
	}
	return errs
}

func validSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if !subjTokRE.MatchString(tok) {
			return false
		}
	}
	return true
}

// DatabaseURL returns the database URL from PGOUTBOX_DATABASE_URL or DATABASE_URL.
func DatabaseURL(env Env) (string, error) {
	if env == nil {
		env = os.LookupEnv
	}
	for _, k := range []string{EnvPrefix + "DATABASE_URL", "DATABASE_URL"} {
		if v, ok := env(k); ok && v != "" {
			return v, nil
		}
	}
	return "", errors.New("config: set PGOUTBOX_DATABASE_URL (or DATABASE_URL) to the kernel database")
}

// RedactURL returns u with any password replaced, for logs and messages.
func RedactURL(u string) string { return redactURL(u) }

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "[unparseable URL]"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		}
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
