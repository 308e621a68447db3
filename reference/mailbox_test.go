package reference

import (
	"encoding/json"
	"testing"
)

// R-DS-1: the extended release keeps both arrays strictly sorted and counted, and carries the
// reference mailbox handler's pair and member exactly once.
func TestExtendReleaseWithMailbox(t *testing.T) {
	base, err := LoadRelease()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ExtendReleaseWithMailbox(base, 7)
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
		if x.EventType == MailboxEventType && x.Destination == MailboxDestination {
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
	if _, err := ExtendReleaseWithMailbox(doc, 8); err == nil {
		t.Fatal("extending twice accepted")
	}
}
