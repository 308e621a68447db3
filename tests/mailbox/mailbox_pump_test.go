package mailbox

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func (b *mbx) processArgs(extra ...string) []string {
	return append([]string{"-source", mbxSource, "-db", b.ourDSN, "-role", mbxPumpRole, "-mailbox-db", b.boxDSN,
		"-table", mbxTable, "-poll", "20ms"}, extra...)
}

func noEnv(string) (string, bool) { return "", false }

// R-MX-11 (seed INV-18, "a second instance refused"; R-SEC-5): cmd/mailboxpump's Process runs
// the source; a second instance for the same source refuses to run, says why and exits 3;
// while the first holds the source every mutating mailbox function called from another session
// raises OB403; an outside role cannot take or block the hold (no advisory lock is involved: it
// has no privilege on the holder rows and its advisory locks change nothing); SIGTERM (context
// cancel) drains and exits 0, after which another instance may run.
func TestMailboxSecondInstanceRefusedAndDrain(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	b.write(1, mbxMsg("a", "t.a", 1))

	// An outsider grabs every advisory lock it likes first: nothing of ours waits on them.
	if _, err := b.admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE outbox_test_nobody_mbx NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `SET ROLE outbox_test_nobody_mbx`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `SELECT pg_advisory_lock(k) FROM generate_series(0, 100) k`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext('legacy-inbox'))`); err != nil {
		t.Fatal(err)
	}
	_, err := b.admin.Exec(ctx, `SELECT 1 FROM mailbox.pump_holders FOR UPDATE`)
	if pgcall.SQLState(err) != "42501" {
		t.Fatalf("outsider locking holder rows: %v", err)
	}
	_, err = b.admin.Exec(ctx, `SELECT mailbox.acquire_pump('legacy-inbox')`)
	if pgcall.SQLState(err) != "42501" {
		t.Fatalf("outsider acquiring: %v", err)
	}
	if _, err := b.admin.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}

	pctx, stop := context.WithCancel(ctx)
	var out1 syncBuf
	done := make(chan int, 1)
	go func() { done <- pump.Process(pctx, b.processArgs(), noEnv, &out1, reference.NewMailboxHandler) }()
	dispatcherfix.Eventually(t, "first instance processed message 1", func() bool { return b.states()[1] == "succeeded" })

	var out2 syncBuf
	code := pump.Process(ctx, b.processArgs(), noEnv, &out2, reference.NewMailboxHandler)
	if code != pump.ExitHeld || !strings.Contains(out2.String(), "refusing to run") || !strings.Contains(out2.String(), mbxSource) {
		t.Fatalf("second instance: exit %d, output %q", code, out2.String())
	}
	// Any other session's mutation is OB403 while the holder lives; reads are fine.
	for _, call := range []func() error{
		func() error { _, err := pgcall.RecordDiscovery(ctx, b.api, mbxSource, nil); return err },
		func() error { _, err := pgcall.ClaimHead(ctx, b.api, mbxSource, "x", time.Minute); return err },
		func() error { _, err := pgcall.ClaimBackfill(ctx, b.api, mbxSource, 10); return err },
		func() error {
			return pgcall.CompleteHead(ctx, b.api, mbxSource, 1, "00000000-0000-4000-8000-000000000000", pgcall.HeadSucceeded, nil)
		},
	} {
		kernelfix.WantState(t, call(), "OB403")
	}
	if _, err := pgcall.GetPipelineStatus(ctx, b.api, mbxSource); err != nil {
		t.Fatalf("status while held: %v", err)
	}
	if ok, err := pgcall.AcquirePump(ctx, b.api, mbxSource); err != nil || ok {
		t.Fatalf("acquire while held: %v %v", ok, err)
	}
	// More work, then SIGTERM: drain, exit 0.
	b.write(2, mbxMsg("a", "t.a", 2))
	dispatcherfix.Eventually(t, "message 2", func() bool { return b.states()[2] == "succeeded" })
	stop()
	select {
	case code := <-done:
		if code != pump.ExitOK {
			t.Fatalf("drain exit %d: %s", code, out1.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pump did not drain")
	}
	// The hold ended with the session: another instance may run now.
	dispatcherfix.Eventually(t, "hold free", func() bool {
		ok, err := pgcall.AcquirePump(ctx, b.api, mbxSource)
		return err == nil && ok
	})
	// Bad configuration is refused before anything runs.
	var out3 syncBuf
	if code := pump.Process(ctx, b.processArgs("-table", "bad; drop table x"), noEnv, &out3, reference.NewMailboxHandler); code != pump.ExitConfig {
		t.Fatalf("bad table name: exit %d %q", code, out3.String())
	}
}

// R-MX-12: the pump's Prometheus metrics - heartbeat age, ticks and failures, watermark and lag
// (ids and seconds), open holes, oldest unmarked terminal age, abandoned backfills, dead letters
// - served on /metrics with the source as the only label (no message ids or keys).
func TestMailboxPumpMetrics(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	b.write(1, mbxMsg("secret-key-1", "t.a", 1))
	b.write(3, `"malformed"`) // hole at 2, and 3 waits
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var out syncBuf
	done := make(chan int, 1)
	go func() {
		done <- pump.Process(pctx, b.processArgs("-metrics-addr", addr), noEnv, &out, reference.NewMailboxHandler)
	}()
	wants := []string{
		`pgoutbox_mailbox_job_heartbeat_age_seconds{source="legacy-inbox"}`,
		`pgoutbox_mailbox_job_ticks_total{source="legacy-inbox"}`,
		`pgoutbox_mailbox_job_failures_total{source="legacy-inbox"} 0`,
		`pgoutbox_mailbox_watermark_lag_ids{source="legacy-inbox"} 1`,
		`pgoutbox_mailbox_watermark_behind_mailbox_ids{source="legacy-inbox"} 2`,
		`pgoutbox_mailbox_watermark_lag_seconds{source="legacy-inbox"}`,
		`pgoutbox_mailbox_backfill_oldest_unmarked_seconds{source="legacy-inbox"}`,
		`pgoutbox_mailbox_backfill_abandoned{source="legacy-inbox"} 0`,
		`pgoutbox_mailbox_dead_letters{source="legacy-inbox"} 0`,
		`pgoutbox_mailbox_processed_total{outcome="succeeded",source="legacy-inbox"} 1`,
	}
	// every series at its value after the same tick (one condition: the gauges are set at
	// different points of a tick, so waiting for two of them alone raced the others)
	var body string
	dispatcherfix.Eventually(t, "metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		bb, _ := io.ReadAll(resp.Body)
		body = string(bb)
		for _, want := range append([]string{`pgoutbox_mailbox_open_holes{source="legacy-inbox"} 1`,
			`pgoutbox_mailbox_watermark{source="legacy-inbox"} 1`}, wants...) {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	})
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "secret-key-1") || strings.Contains(body, "msg_id") {
		t.Error("metrics carry a message key or id")
	}
	// Issue 21 item 6: the pump's real /metrics output passes promlint.
	if problems, err := promlint.New(strings.NewReader(body)).Lint(); err != nil || len(problems) != 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
	stop()
	if code := <-done; code != pump.ExitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
