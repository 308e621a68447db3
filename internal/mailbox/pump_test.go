package mailbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/release"
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

// R-DS-1: the extended release keeps both arrays strictly sorted and counted, and carries the
// reference handler's pair and member exactly once.
func TestExtendRelease(t *testing.T) {
	base, err := release.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ExtendRelease(base, 7)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Version int `json:"deliverySetVersion"`
		Apps    []struct {
			EventType, EventSchemaVersion string
		} `json:"applicableEvents"`
		AppCount int `json:"applicableEventCount"`
		Members  []struct {
			EventType, EventSchemaVersion, Destination, ConsumerName string
		} `json:"members"`
		MemberCount int    `json:"memberCount"`
		Digest      string `json:"deliverySetDefinitionDigest"`
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 7 || m.AppCount != len(m.Apps) || m.MemberCount != len(m.Members) || len(m.Digest) != 64 {
		t.Fatalf("version %d counts %d/%d %d/%d digest %q", m.Version, m.AppCount, len(m.Apps), m.MemberCount, len(m.Members), m.Digest)
	}
	for i := 1; i < len(m.Apps); i++ {
		a, b := m.Apps[i-1], m.Apps[i]
		if a.EventType+"\x00"+a.EventSchemaVersion >= b.EventType+"\x00"+b.EventSchemaVersion {
			t.Fatalf("applicableEvents not strictly sorted at %d", i)
		}
	}
	found := 0
	for i, x := range m.Members {
		if x.EventType == EventType && x.Destination == Destination {
			found++
		}
		if i > 0 {
			a := m.Members[i-1]
			if a.EventType+"\x00"+a.EventSchemaVersion+"\x00"+a.Destination+"\x00"+a.ConsumerName >=
				x.EventType+"\x00"+x.EventSchemaVersion+"\x00"+x.Destination+"\x00"+x.ConsumerName {
				t.Fatalf("members not strictly sorted at %d", i)
			}
		}
	}
	if found != 1 {
		t.Fatalf("mailbox member found %d times", found)
	}
	if _, err := ExtendRelease(doc, 8); err == nil {
		t.Fatal("extending twice accepted")
	}
}
