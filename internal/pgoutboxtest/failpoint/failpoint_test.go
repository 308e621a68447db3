package failpoint

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func disarm() { armed.Store(false); points = nil }

// R-DP-6 spirit: failpoints are refused outside test mode and in production mode; unset means
// nothing is armed.
func TestConfigureRefusesOutsideTestMode(t *testing.T) {
	defer disarm()
	if err := Configure(env(nil), true); err != nil || Armed() {
		t.Fatalf("unset: err %v, armed %v", err, Armed())
	}
	if err := Configure(env(map[string]string{EnvFailpoints: "  "}), true); err != nil || Armed() {
		t.Fatalf("empty: err %v, armed %v", err, Armed())
	}
	err := Configure(env(map[string]string{EnvFailpoints: "after_claim=kill"}), false)
	if err == nil || !strings.Contains(err.Error(), "PGOUTBOX_TEST_MODE=1 is not") || Armed() {
		t.Fatalf("without test mode: err %v, armed %v", err, Armed())
	}
	err = Configure(env(map[string]string{EnvFailpoints: "after_claim=kill", EnvTestMode: "true"}), false)
	if err == nil || Armed() {
		t.Fatalf("test mode not exactly 1: err %v, armed %v", err, Armed())
	}
	err = Configure(env(map[string]string{EnvFailpoints: "after_claim=kill", EnvTestMode: "1"}), true)
	if err == nil || !strings.Contains(err.Error(), "production") || Armed() {
		t.Fatalf("production: err %v, armed %v", err, Armed())
	}
	if err := Configure(env(map[string]string{EnvFailpoints: "after_claim=kill", EnvTestMode: "1"}), false); err != nil || !Armed() {
		t.Fatalf("test mode: err %v, armed %v", err, Armed())
	}
}

func TestParse(t *testing.T) {
	ps, err := parse("before_claim=kill, after_ack=pause@3")
	if err != nil {
		t.Fatal(err)
	}
	if p := ps[BeforeClaim]; p.action != Kill || p.nth != 1 {
		t.Fatalf("before_claim %+v", p)
	}
	if p := ps[AfterAck]; p.action != Pause || p.nth != 3 {
		t.Fatalf("after_ack %+v", p)
	}
	for _, bad := range []string{"after_claim", "nope=kill", "after_claim=explode", "after_claim=kill@0",
		"after_claim=kill@x", "after_claim=kill,after_claim=pause", ","} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// The action fires on exactly the N-th hit, prints the marker first, and sends the signal.
func TestInjectFiresOnNthHitOnly(t *testing.T) {
	defer disarm()
	var buf bytes.Buffer
	var sent []syscall.Signal
	out, signal = &buf, func(s syscall.Signal) { sent = append(sent, s) }
	if err := Configure(env(map[string]string{EnvFailpoints: "after_deliver=pause@2", EnvTestMode: "1"}), false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		Inject(AfterDeliver)
		Inject(AfterAck) // not armed
	}
	if len(sent) != 1 || sent[0] != syscall.SIGSTOP {
		t.Fatalf("signals %v, want one SIGSTOP", sent)
	}
	if buf.String() != "failpoint after_deliver hit\n" {
		t.Fatalf("marker %q", buf.String())
	}
}

func TestInjectDisarmedIsNoop(t *testing.T) {
	disarm()
	signal = func(syscall.Signal) { t.Fatal("signal sent while disarmed") }
	for _, n := range Names {
		Inject(n)
	}
}

func BenchmarkInjectDisarmed(b *testing.B) {
	disarm()
	for i := 0; i < b.N; i++ {
		Inject(AfterClaim)
	}
}
