// Package failpoint holds the test-only failpoints of the dispatcher and of outboxctl: named
// places in the delivery loop, or between the steps of the projection cutover protocol, where a
// test can make the real process die by SIGKILL or stop itself (SPEC T-2, T-3, T-10, R-AK-8).
// Product code never imports this package: the binaries get it only when built with -tags
// failpoints (cmd/dispatcher/hooks_failpoints.go, cmd/outboxctl/failpoints_on.go), which the
// crash tests do; the dispatcher calls it through its hook (dispatcher.Options.Hook). Even then
// it is off by default: Inject is a no-op (one atomic load) unless Configure armed it, and
// Configure refuses to arm anything outside test mode (R-DP-6 spirit).
//
// Arming: PGOUTBOX_TEST_MODE=1 and PGOUTBOX_FAILPOINTS="after_claim=kill,after_ack=kill@3"
// (NAME=ACTION[@N], actions kill and pause). PGOUTBOX_FAILPOINTS without test mode makes
// Configure return an error and the process refuse to start.
//
// The syntax and the actions in detail: docs/dispatcher.md#package-failpoint-test-only.
package failpoint

import (
	"errors"

	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/oceanway/pgoutbox/dispatcher"
)

// Environment variables read by Configure.
const (
	EnvFailpoints = "PGOUTBOX_FAILPOINTS"
	EnvTestMode   = "PGOUTBOX_TEST_MODE"
)

// The dispatcher's crash windows (SPEC T-3): its hook points (dispatcher/hooks.go), which a
// dispatcher built with -tags failpoints hands to Inject.
const (
	BeforeClaim    = dispatcher.HookBeforeClaim
	AfterClaim     = dispatcher.HookAfterClaim
	AfterDeliver   = dispatcher.HookAfterDeliver
	AfterAck       = dispatcher.HookAfterAck
	DuringBatchAck = dispatcher.HookDuringBatchAck
	PipelinedClaim = dispatcher.HookPipelinedClaim
)

// The cutover caller's crash windows (SPEC T-10, R-PV-2, R-PV-3): outboxctl projection build /
// freeze / pause / cutover / rollback hit them right after the named call returned (committed),
// before anything is printed, so a kill there loses the call's answer (a build token, a proof id).
const (
	ProjectionAfterBuild   = "projection_after_build"   // start_shadow_build committed
	ProjectionAfterFreeze  = "projection_after_freeze"  // freeze_cutover_candidate committed (token rotated)
	ProjectionAfterPause   = "projection_after_pause"   // pause_destination_claims committed
	ProjectionAfterCutover = "projection_after_cutover" // cutover_projection committed (switched or blocked)
)

// Names are the failpoints Configure accepts.
var Names = []string{BeforeClaim, AfterClaim, AfterDeliver, AfterAck, DuringBatchAck, PipelinedClaim,
	ProjectionAfterBuild, ProjectionAfterFreeze, ProjectionAfterPause, ProjectionAfterCutover}

// Action is what an armed failpoint does on its N-th hit.
type Action string

// Actions.
const (
	Kill  Action = "kill"
	Pause Action = "pause"
)

type point struct {
	action Action
	nth    int64
	hits   atomic.Int64
}

var (
	armed  atomic.Bool
	points map[string]*point // written once by Configure before armed is set
	fireMu sync.Mutex
	out    io.Writer = os.Stderr
	// signal is syscall.Kill on the own pid; replaced in unit tests.
	signal = func(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }
)

// Inject marks the failpoint name. Disarmed (always, outside tests) it costs one atomic load.
func Inject(name string) {
	if !armed.Load() {
		return
	}
	fire(name)
}

func fire(name string) {
	p := points[name]
	if p == nil || p.hits.Add(1) != p.nth {
		return
	}
	fireMu.Lock()
	defer fireMu.Unlock()
	fmt.Fprintf(out, "failpoint %s hit\n", name)
	switch p.action {
	case Kill:
		signal(syscall.SIGKILL)
		select {} // never returns: the signal is on its way
	case Pause:
		signal(syscall.SIGSTOP) // returns after SIGCONT
	}
}

// Armed reports whether any failpoint is armed.
func Armed() bool { return armed.Load() }

// Configure arms the failpoints named by PGOUTBOX_FAILPOINTS (read through lookup). With the
// variable unset or empty it does nothing and returns nil. Otherwise it refuses — returns an
// error the caller must turn into a refused start — unless PGOUTBOX_TEST_MODE is "1" and the
// process is not in production mode; a malformed or unknown entry is refused as well.
func Configure(lookup func(string) (string, bool), production bool) error {
	spec, _ := lookup(EnvFailpoints)
	if strings.TrimSpace(spec) == "" {
		return nil
	}
	if v, _ := lookup(EnvTestMode); v != "1" {
		return errors.New(EnvFailpoints + " is set but " + EnvTestMode + "=1 is not: failpoints are test-only and refused outside test mode")
	}
	if production {
		return errors.New(EnvFailpoints + " is set in production mode: failpoints are refused in production (use mode = \"development\" with " + EnvTestMode + "=1)")
	}
	ps, err := parse(spec)
	if err != nil {
		return err
	}
	points = ps
	armed.Store(true)
	return nil
}

// parse reads a PGOUTBOX_FAILPOINTS value: comma-separated NAME=ACTION[@N].
func parse(spec string) (map[string]*point, error) {
	ps := map[string]*point{}
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, act, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%s: entry %q: want NAME=ACTION[@N]", EnvFailpoints, entry)
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(Names, name) {
			return nil, fmt.Errorf("%s: unknown failpoint %q (known: %s)", EnvFailpoints, name, strings.Join(Names, ", "))
		}
		if _, dup := ps[name]; dup {
			return nil, fmt.Errorf("%s: failpoint %q given twice", EnvFailpoints, name)
		}
		p := &point{nth: 1}
		a, n, hasN := strings.Cut(strings.TrimSpace(act), "@")
		switch Action(a) {
		case Kill, Pause:
			p.action = Action(a)
		default:
			return nil, fmt.Errorf("%s: failpoint %q: unknown action %q (kill or pause)", EnvFailpoints, name, a)
		}
		if hasN {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("%s: failpoint %q: hit number %q must be a positive integer", EnvFailpoints, name, n)
			}
			p.nth = v
		}
		ps[name] = p
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no failpoint given", EnvFailpoints)
	}
	return ps, nil
}
