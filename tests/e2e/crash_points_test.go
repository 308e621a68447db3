package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
)

// T-3, R-AK-8, R-CL-2, R-CL-3: the real cmd/dispatcher is killed by SIGKILL at each crash window
// while it delivers the reference scenario (2 runs: 27 events, 29 mandatory deliveries) over
// loopback HTTP with HMAC to the real cmd/refconsumer (four reference consumers, each with its
// own database). A test-only failpoint (internal/pgoutboxtest/failpoint, armed by PGOUTBOX_FAILPOINTS under
// PGOUTBOX_TEST_MODE=1) places the kill deterministically. A second dispatcher process without
// failpoints then recovers the expired leases (lease_expired_unknown) and finishes the work.
// The final state must be the same as without the crash: every mandatory delivery terminal,
// every attempt start with exactly one finish, each effect applied once, receipts unique,
// published_at set for exactly the fully acknowledged events.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	bins := procfix.Build(t, t.TempDir())
	cases := []struct {
		window, spec string
		check        func(t *testing.T, killed string, att []procfix.Attempt, rc map[string]map[string]procfix.Receipt)
	}{
		{
			// Before claim, mid-run: the first batch was claimed and is being delivered when the
			// second claim is about to start.
			window: failpoint.BeforeClaim, spec: "before_claim=kill@2",
			check: func(t *testing.T, killed string, att []procfix.Attempt, _ map[string]map[string]procfix.Receipt) {
				if n := cpCount(att, func(a procfix.Attempt) bool { return a.Worker == killed }); n < 1 {
					t.Errorf("the killed dispatcher made %d attempts, want its first batch", n)
				}
			},
		},
		{
			// After the claim committed, before any consumer is called: every attempt of the killed
			// process ends lease_expired_unknown, and each of those deliveries is acknowledged on a
			// later attempt whose consumer call happened after the reclaim (R-CL-2, R-CL-5).
			window: failpoint.AfterClaim, spec: "after_claim=kill",
			check: func(t *testing.T, killed string, att []procfix.Attempt, rc map[string]map[string]procfix.Receipt) {
				mine := cpFilter(att, func(a procfix.Attempt) bool { return a.Worker == killed })
				if len(mine) == 0 {
					t.Fatal("the killed dispatcher claimed nothing")
				}
				for _, a := range mine {
					if a.Outcome != "lease_expired_unknown" {
						t.Errorf("attempt of the killed dispatcher finished %q, want lease_expired_unknown", a.Outcome)
					}
					later, ok := cpFinalAfter(att, a)
					if !ok {
						t.Errorf("delivery %s/%s: no later terminal attempt", a.Destination, a.EventID)
						continue
					}
					if later.Outcome != "acknowledged" {
						continue // the rejected event: quarantined on the re-claim, no receipt
					}
					r, ok := rc[procfix.ConsumerOf(a.Destination)][a.EventID]
					if !ok || r.RecordedAt.Before(later.StartedAt) {
						t.Errorf("delivery %s/%s: receipt %v before the re-claim at %v: the consumer was called by the killed process", a.Destination, a.EventID, r.RecordedAt, later.StartedAt)
					}
				}
			},
		},
		{
			// R-AK-8: the consumer committed its receipt, the dispatcher dies before ack_delivery.
			// Recovery appends lease_expired_unknown, the redelivery finds the receipt and the same
			// ack is recorded on a later attempt; the effect is applied once.
			window: failpoint.AfterDeliver, spec: "after_deliver=kill",
			check: func(t *testing.T, killed string, att []procfix.Attempt, rc map[string]map[string]procfix.Receipt) {
				found := 0
				for _, a := range att {
					if a.Worker != killed || a.Outcome != "lease_expired_unknown" {
						continue
					}
					later, ok := cpFinalAfter(att, a)
					if !ok {
						t.Errorf("delivery %s/%s: no later terminal attempt", a.Destination, a.EventID)
						continue
					}
					if r, ok := rc[procfix.ConsumerOf(a.Destination)][a.EventID]; ok && later.Outcome == "acknowledged" && r.RecordedAt.Before(later.StartedAt) {
						found++ // receipt committed in the killed run; the redelivery was harmless
					}
				}
				if found == 0 {
					t.Error("no delivery whose receipt was committed before the crash and acknowledged after it (R-AK-8)")
				}
			},
		},
		{
			// After the ack committed (third ack of the run), with other deliveries in flight.
			window: failpoint.AfterAck, spec: "after_ack=kill@3",
			check: func(t *testing.T, killed string, att []procfix.Attempt, _ map[string]map[string]procfix.Receipt) {
				if n := cpCount(att, func(a procfix.Attempt) bool { return a.Worker == killed && a.Outcome == "acknowledged" }); n < 3 {
					t.Errorf("the killed dispatcher has %d acknowledged attempts, want at least 3", n)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.window, func(t *testing.T) {
			t.Parallel()
			w := procfix.SetupWorld(t)
			w.Produce(t, 2)
			_, consumerAddr := procfix.StartConsumers(t, bins, w)
			killed := "cp-crash-" + c.window + "-1"
			d1, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
				Worker: killed, Lease: "2s", Renewal: true, Batch: 4, Concurrency: 4, Failpoints: c.spec})
			d1.WaitKilled(t)
			d1.WaitLine(t, "failpoint "+c.window+" hit")
			w.WaitDispatcherBackendsGone(t)

			d2, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
				Worker: "cp-crash-" + c.window + "-2", Lease: "2s", Renewal: true, Batch: 4, Concurrency: 4})
			att, rc := w.CheckFinal(t)
			c.check(t, killed, att, rc)
			d2.Stop(t)
		})
	}
}

func cpFilter(att []procfix.Attempt, keep func(procfix.Attempt) bool) []procfix.Attempt {
	var out []procfix.Attempt
	for _, a := range att {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

func cpCount(att []procfix.Attempt, keep func(procfix.Attempt) bool) int {
	return len(cpFilter(att, keep))
}

// cpFinalAfter returns the terminal (acknowledged or non_retryable) attempt of a's delivery with
// a higher attempt number.
func cpFinalAfter(att []procfix.Attempt, a procfix.Attempt) (procfix.Attempt, bool) {
	for _, b := range att {
		if b.Destination == a.Destination && b.EventID == a.EventID && b.Number > a.Number &&
			(b.Outcome == "acknowledged" || b.Outcome == "non_retryable") {
			return b, true
		}
	}
	return procfix.Attempt{}, false
}

// R-DP-6 (spirit), T-3: failpoints are never on by default. The real binary refuses to start,
// with a clear message and exit code 2, when PGOUTBOX_FAILPOINTS is set without
// PGOUTBOX_TEST_MODE=1, or in production mode even with it, or names an unknown failpoint.
func TestDispatcherRefusesFailpointsOutsideTestMode(t *testing.T) {
	t.Parallel()
	bins := procfix.Build(t, t.TempDir())
	dir := t.TempDir()
	dest := "\n[destinations.metering_input_processor]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/x\"\nauth = \"hmac\"\nsecret_env = \"CP_SECRET\"\n"
	cases := []struct{ mode, failpoints, testMode, want string }{
		{"development", "after_claim=kill", "", "PGOUTBOX_TEST_MODE=1 is not"},
		{"development", "after_claim=kill", "0", "PGOUTBOX_TEST_MODE=1 is not"},
		{"production", "after_claim=kill", "1", "refused in production"},
		{"development", "after_lunch=kill", "1", `unknown failpoint \"after_lunch`}, // JSON log: quotes escaped
	}
	for i, c := range cases {
		p := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		if err := os.WriteFile(p, []byte("mode = \""+c.mode+"\"\n"+dest), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bins.Dispatcher, "-config", p)
		cmd.Env = []string{"PGOUTBOX_DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "CP_SECRET=" + dispatcherfix.Secret,
			"PGOUTBOX_FAILPOINTS=" + c.failpoints}
		if c.testMode != "" {
			cmd.Env = append(cmd.Env, "PGOUTBOX_TEST_MODE="+c.testMode)
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%+v: %v, output %q; want exit 2 with %q", c, err, out, c.want)
		}
	}
}
