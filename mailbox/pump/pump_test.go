package pump

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/mailbox"
)

// The mailbox table name reaches SQL text: only plain identifiers (optionally schema-qualified)
// pass, and they are quoted.
func TestQuoteTable(t *testing.T) {
	ok := map[string]string{
		"mailbox":        `"mailbox"`,
		"legacy.mailbox": `"legacy"."mailbox"`,
		"MSG_INBOX":      `"MSG_INBOX"`,
	}
	for in, want := range ok {
		got, err := QuoteTable(in)
		if err != nil || got != want {
			t.Errorf("QuoteTable(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a.b.c", "mail box", `x"; DROP TABLE y; --`, "1abc", "a.", ".a", strings.Repeat("a", 64)} {
		if _, err := QuoteTable(bad); err == nil {
			t.Errorf("QuoteTable(%q) accepted", bad)
		}
	}
}

// D-5: out-of-range configuration is refused before the pump starts.
func TestConfigValidate(t *testing.T) {
	good := Defaults()
	good.Source, good.Table = "legacy-inbox", "mailbox"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"source":    func(c *Config) { c.Source = "Legacy" },
		"table":     func(c *Config) { c.Table = "a;b" },
		"worker":    func(c *Config) { c.Worker = "" },
		"lease":     func(c *Config) { c.Lease = 2 * time.Hour },
		"discovery": func(c *Config) { c.DiscoveryBatch = 0 },
		"backfill":  func(c *Config) { c.BackfillBatch = 1001 },
		"poll":      func(c *Config) { c.PollInterval = time.Millisecond },
		"rescan":    func(c *Config) { c.LateRescan = -time.Second },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

type nopHandler struct{}

func (nopHandler) Handle(context.Context, pgx.Tx, string, *mailbox.Head) (mailbox.Result, error) {
	return mailbox.Result{Outcome: mailbox.Succeeded}, nil
}

// The pump runs any mailbox.Handler and refuses to be built without one.
func TestNewTakesAnyHandler(t *testing.T) {
	cfg := Defaults()
	cfg.Source, cfg.Table = "legacy-inbox", "mailbox"
	if _, err := New(cfg, nil, nil, nopHandler{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil, nil, nil, nil, nil); err == nil {
		t.Fatal("a pump without a handler was built")
	}
	if mailbox.Succeeded != pgcall.HeadSucceeded || mailbox.Dead != pgcall.HeadDead {
		t.Fatal("the public outcomes differ from mailbox.complete_head's")
	}
}
