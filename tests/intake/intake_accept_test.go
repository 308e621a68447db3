package intake

// Observation intake: submission, canonicalization, insert-or-compare, accepted envelope
// (SPEC §11a R-OB-1, R-OB-2, R-OB-3; T-9), against real PostgreSQL, each call as the workload
// role (member of outbox_intake) a real edge service uses.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-OB-1, R-OB-2, T-9 "the same submission twice": accepted_new, then accepted_existing with the
// original acceptedAt and digests; the registry and the payload hold one row.
func TestIntakeAcceptNewThenExisting(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	id := testfix.NewUUID()
	doc := intakefix.JSON(t, intakefix.Sub(id))
	first := intakefix.One(t, b.EdgeA, doc)
	intakefix.Want(t, first, "accepted_new", "")
	if first.ObservationID != id || len(first.SubmissionPayloadSHA256) != 64 || len(first.AcceptedEnvelopeSHA256) != 64 || first.AcceptedAt.IsZero() {
		t.Fatalf("accepted_new row incomplete: %+v", first)
	}
	time.Sleep(5 * time.Millisecond) // a later transaction time, so a re-stamped acceptedAt would show
	again := intakefix.One(t, b.EdgeA, doc)
	intakefix.Want(t, again, "accepted_existing", "")
	if !again.AcceptedAt.Equal(first.AcceptedAt) || again.SubmissionPayloadSHA256 != first.SubmissionPayloadSHA256 ||
		again.AcceptedEnvelopeSHA256 != first.AcceptedEnvelopeSHA256 {
		t.Fatalf("replay answered %+v, want the original %+v", again, first)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observations WHERE observation_id = $1::uuid`, id); n != 1 {
		t.Fatalf("%d payload rows", n)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_ids WHERE observation_id = $1::uuid`, id); n != 1 {
		t.Fatalf("%d registry rows", n)
	}
}

// R-OB-1, R-OB-3: submissionPayloadSha256 is jcs-sha256-v1 of the whole canonical submission and
// acceptedEnvelopeSha256 of the AcceptedObservationEnvelope@1; both texts are what the kernel's
// own canonicalizer (outbox.jcs_canonicalize) and Go's internal/canon produce; the source comes
// from the workload registry and acceptedAt from the database.
func TestIntakeDigestsAreJCS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	id := testfix.NewUUID()
	sub := intakefix.Sub(id)
	sub["sourceClaimedObservedAt"] = "2001-01-01T00:00:00Z"
	sub["body"].(map[string]any)["label"] = "naïve ☃ \"quoted\"\n"
	doc := intakefix.JSON(t, sub)
	o := intakefix.One(t, b.EdgeA, doc)
	intakefix.Want(t, o, "accepted_new", "")

	wantSub, err := canon.Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wantSub)
	if o.SubmissionPayloadSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("submission digest %s, want sha256 of %s", o.SubmissionPayloadSHA256, wantSub)
	}
	var envText string
	var same bool
	var envSha string
	if err := b.Admin.QueryRow(ctx, `SELECT accepted_envelope_canonical, outbox.jcs_canonicalize(accepted_envelope_canonical::json) = accepted_envelope_canonical,
		outbox.jcs_sha256(accepted_envelope_canonical::json) FROM intake.observations WHERE observation_id = $1::uuid`, id).Scan(&envText, &same, &envSha); err != nil {
		t.Fatal(err)
	}
	if !same || envSha != o.AcceptedEnvelopeSHA256 {
		t.Fatalf("envelope text is not its own JCS form or digest differs: %s", envText)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(envText), &env); err != nil {
		t.Fatal(err)
	}
	src := env["source"].(map[string]any)
	if src["workloadPrincipalId"] != intakefix.WorkloadA || src["service"] != "api-edge" || src["environment"] != "test" || src["deploymentId"] != "edge-a-1" {
		t.Fatalf("source %v is not the registry's", src)
	}
	if env["observationDigestAlgorithmVersion"] != "jcs-sha256-v1" || env["submissionPayloadSha256"] != o.SubmissionPayloadSHA256 {
		t.Fatalf("envelope algorithm/digest members wrong: %v", env)
	}
	at, err := time.Parse(time.RFC3339Nano, env["acceptedAt"].(string))
	if err != nil || !at.Equal(o.AcceptedAt) {
		t.Fatalf("acceptedAt %v (%v), want the database's %v", env["acceptedAt"], err, o.AcceptedAt)
	}
	if env["sourceClaimedObservedAt"] != "2001-01-01T00:00:00Z" {
		t.Fatalf("claimed time not kept as a claim: %v", env["sourceClaimedObservedAt"])
	}
}

// R-OB-1, T-9 "NFC": a body sent in NFD gives the same digest as the NFC form (member names and
// string values are normalized), so the NFD re-submission is a replay; two member names equal
// after NFC are a normalization collision (OB201).
func TestIntakeNFCNormalizationAndCollision(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	id := testfix.NewUUID()
	nfc := intakefix.Sub(id)
	nfc["body"].(map[string]any)["label"] = "caf\u00e9"
	nfd := intakefix.Sub(id)
	nfd["body"].(map[string]any)["label"] = "cafe\u0301"
	first := intakefix.One(t, b.EdgeA, intakefix.JSON(t, nfc))
	intakefix.Want(t, first, "accepted_new", "")
	second := intakefix.One(t, b.EdgeA, intakefix.JSON(t, nfd))
	intakefix.Want(t, second, "accepted_existing", "")
	if second.SubmissionPayloadSHA256 != first.SubmissionPayloadSHA256 {
		t.Fatal("NFD and NFC forms have different digests")
	}
	// a collision: "e\u0301x" and "\u00e9x" are one name after NFC
	raw := `{"observationId":"` + testfix.NewUUID() + `","observationType":"request_attempt","observationSchemaVersion":1,
		"body":{"requestId":"r","outcome":"succeeded","e\u0301x":1,"\u00e9x":2}}`
	intakefix.Want(t, intakefix.One(t, b.EdgeA, json.RawMessage(raw)), "rejected", "OB201")
}

// R-OB-1, T-9 "duplicate keys", "unknown member": every item-level refusal is a rejected row
// with its SQLSTATE, never raised; nothing is stored for a rejected item.
func TestIntakeRejectionsPerItem(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	mk := func(mut func(m map[string]any)) json.RawMessage {
		m := intakefix.Sub(testfix.NewUUID())
		mut(m)
		return intakefix.JSON(t, m)
	}
	body := func(m map[string]any) map[string]any { return m["body"].(map[string]any) }
	id := testfix.NewUUID()
	cases := []struct {
		name, state string
		doc         json.RawMessage
	}{
		{"duplicate top-level key", "OB201", json.RawMessage(`{"observationId":"` + id + `","observationId":"` + id + `","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"r","outcome":"succeeded"}}`)},
		{"duplicate body key", "OB201", json.RawMessage(`{"observationId":"` + testfix.NewUUID() + `","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"r","requestId":"r","outcome":"succeeded"}}`)},
		{"\\u0000 in a string", "OB201", json.RawMessage(`{"observationId":"` + testfix.NewUUID() + `","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"a\u0000b","outcome":"succeeded"}}`)},
		{"lone surrogate escape", "OB201", json.RawMessage(`{"observationId":"` + testfix.NewUUID() + `","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"\ud800","outcome":"succeeded"}}`)},
		{"not an object", "OB702", json.RawMessage(`[1,2]`)},
		{"producer-claimed acceptedAt", "OB702", mk(func(m map[string]any) { m["acceptedAt"] = "2026-01-01T00:00:00Z" })},
		{"producer-claimed source", "OB702", mk(func(m map[string]any) { m["source"] = map[string]any{"service": "x"} })},
		{"observationId not a uuid", "OB702", mk(func(m map[string]any) { m["observationId"] = "abc" })},
		{"unknown type", "OB702", mk(func(m map[string]any) { m["observationType"] = "no_such_type" })},
		{"unknown version", "OB702", mk(func(m map[string]any) { m["observationSchemaVersion"] = 2 })},
		{"claimed time not RFC 3339", "OB702", mk(func(m map[string]any) { m["sourceClaimedObservedAt"] = "yesterday" })},
		{"body not an object", "OB702", mk(func(m map[string]any) { m["body"] = "x" })},
		{"unknown body member", "OB702", mk(func(m map[string]any) { body(m)["backendModelId"] = "m" })},
		{"null not allowed", "OB702", mk(func(m map[string]any) { body(m)["httpStatus"] = nil })},
		{"member of another branch", "OB702", mk(func(m map[string]any) { body(m)["normalizedCode"] = "upstream_timeout" })},
		{"required member missing", "OB702", mk(func(m map[string]any) { delete(body(m), "requestId") })},
		{"required branch member missing", "OB702", mk(func(m map[string]any) { body(m)["outcome"] = "failed" })},
		{"enum value unknown", "OB702", mk(func(m map[string]any) { body(m)["outcome"] = "maybe" })},
		{"integer above maximum", "OB702", mk(func(m map[string]any) { body(m)["httpStatus"] = 600 })},
		{"integer not shortest form", "OB702", json.RawMessage(`{"observationId":"` + testfix.NewUUID() + `","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"r","outcome":"succeeded","durationMs":1.5}}`)},
		{"string too long", "OB702", mk(func(m map[string]any) { body(m)["label"] = strings.Repeat("x", 33) })},
		{"wrong type", "OB702", mk(func(m map[string]any) { body(m)["replayed"] = "yes" })},
		{"uuid member not a uuid", "OB702", mk(func(m map[string]any) { body(m)["runId"] = "run-1" })},
		{"timestamp member not a timestamp", "OB702", mk(func(m map[string]any) { body(m)["startedAt"] = "noon" })},
		{"policy version not registered", "OB702", mk(func(m map[string]any) {
			body(m)["outcome"], body(m)["normalizedCode"], body(m)["errorNormalizationPolicyVersion"] = "failed", "upstream_timeout", "policy-9"
		})},
		{"normalized code not in the policy", "OB702", mk(func(m map[string]any) {
			body(m)["outcome"], body(m)["normalizedCode"], body(m)["errorNormalizationPolicyVersion"] = "failed", "made_up", "policy-1"
		})},
	}
	docs := make([]json.RawMessage, 0, len(cases)+1)
	for _, c := range cases {
		docs = append(docs, c.doc)
	}
	good := mk(func(m map[string]any) {
		body(m)["outcome"], body(m)["normalizedCode"], body(m)["errorNormalizationPolicyVersion"] = "failed", "upstream_timeout", "policy-1"
		body(m)["label"] = nil // nullable
		body(m)["runId"] = testfix.NewUUID()
		body(m)["startedAt"] = "2026-12-03T10:00:00.123+01:00"
		body(m)["replayed"] = false
	})
	docs = append(docs, good)
	out := intakefix.Accept(t, b.EdgeA, docs...) // one batch: an invalid item never stops the others
	for i, c := range cases {
		if out[i].Outcome != "rejected" || out[i].SQLState != c.state {
			t.Errorf("%s: %s/%s (%s), want rejected/%s", c.name, out[i].Outcome, out[i].SQLState, out[i].Detail, c.state)
		}
		if out[i].AcceptedAt != (time.Time{}) || out[i].AcceptedEnvelopeSHA256 != "" {
			t.Errorf("%s: a rejected row carries acceptance data: %+v", c.name, out[i])
		}
	}
	intakefix.Want(t, out[len(cases)], "accepted_new", "")
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_ids`); n != 1 {
		t.Fatalf("%d registry rows, want only the valid item's", n)
	}
	// The other workload may not use workload A's policy matrix cell (per-workload matrix).
	intakefix.Want(t, intakefix.One(t, b.EdgeB, mk(func(m map[string]any) {
		body(m)["outcome"], body(m)["normalizedCode"], body(m)["errorNormalizationPolicyVersion"] = "failed", "upstream_timeout", "policy-1"
	})), "rejected", "OB702")
	// A valid surrogate pair (an emoji as escapes) is strict UTF-8 and accepted.
	intakefix.Want(t, intakefix.One(t, b.EdgeA, json.RawMessage(`{"observationId":"`+testfix.NewUUID()+`","observationType":"request_attempt","observationSchemaVersion":1,"body":{"requestId":"\ud83d\ude00","outcome":"succeeded"}}`)), "accepted_new", "")
}

// R-OB-2, T-9 "the same id from another source or with another body": conflict with OB701, the
// low-sensitivity audit row commits with the answer, nothing of the first submission is
// revealed (no acceptedAt, no envelope digest; the submission digest is the caller's own).
func TestIntakeConflictAuditedNothingRevealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	id := testfix.NewUUID()
	first := intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(id)))
	intakefix.Want(t, first, "accepted_new", "")

	other := intakefix.Sub(id)
	other["body"].(map[string]any)["durationMs"] = 13
	for _, c := range []struct {
		name   string
		conn   *pgx.Conn
		doc    json.RawMessage
		reason string
	}{
		{"another source, same body", b.EdgeB, intakefix.JSON(t, intakefix.Sub(id)), "other_source"},
		{"same source, another body", b.EdgeA, intakefix.JSON(t, other), "other_digest"},
	} {
		tx, err := c.conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o := intakefix.One(t, tx, c.doc)
		if err := tx.Commit(ctx); err != nil { // the caller commits its answer; the audit row with it
			t.Fatal(err)
		}
		intakefix.Want(t, o, "conflict", "OB701")
		if !o.AcceptedAt.IsZero() || o.AcceptedEnvelopeSHA256 != "" || o.SubmissionPayloadSHA256 == first.SubmissionPayloadSHA256 && c.reason == "other_digest" {
			t.Fatalf("%s: the conflict reveals the first submission: %+v", c.name, o)
		}
		if strings.Contains(o.Detail, first.SubmissionPayloadSHA256) || strings.Contains(o.Detail, intakefix.WorkloadA) {
			t.Fatalf("%s: detail reveals the first source or digest: %s", c.name, o.Detail)
		}
		var second, reason string
		if err := b.Admin.QueryRow(ctx, `SELECT second_workload_id, reason FROM intake.observation_conflicts
			WHERE observation_id = $1::uuid ORDER BY conflict_id DESC LIMIT 1`, id).Scan(&second, &reason); err != nil {
			t.Fatalf("%s: no audit row: %v", c.name, err)
		}
		if reason != c.reason {
			t.Fatalf("%s: audit reason %s, want %s", c.name, reason, c.reason)
		}
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_conflicts WHERE observation_id = $1::uuid AND first_workload_id = $2`, id, intakefix.WorkloadA); n != 2 {
		t.Fatalf("%d audit rows, want 2", n)
	}
	// the first acceptance is untouched
	again := intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(id)))
	intakefix.Want(t, again, "accepted_existing", "")
	if again.AcceptedEnvelopeSHA256 != first.AcceptedEnvelopeSHA256 {
		t.Fatal("the conflict changed the accepted envelope")
	}
}

// R-OB-2: a batch answers one row per item in input order; the same id twice in one batch is
// accepted once and then compared (same content: accepted_existing; other content: conflict).
func TestIntakeBatchInputOrderAndRepeats(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	ids := []string{testfix.NewUUID(), testfix.NewUUID(), testfix.NewUUID()}
	other := intakefix.Sub(ids[0])
	other["body"].(map[string]any)["durationMs"] = 99
	out := intakefix.Accept(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(ids[2])), intakefix.JSON(t, intakefix.Sub(ids[0])), json.RawMessage(`"junk"`),
		intakefix.JSON(t, intakefix.Sub(ids[0])), intakefix.JSON(t, other), intakefix.JSON(t, intakefix.Sub(ids[1])))
	want := []struct{ outcome, id string }{
		{"accepted_new", ids[2]}, {"accepted_new", ids[0]}, {"rejected", ""}, {"accepted_existing", ids[0]}, {"conflict", ids[0]}, {"accepted_new", ids[1]},
	}
	for i, w := range want {
		if out[i].Outcome != w.outcome || out[i].ObservationID != w.id {
			t.Errorf("item %d: %s %s, want %s %s", i, out[i].Outcome, out[i].ObservationID, w.outcome, w.id)
		}
	}
}

// R-OB-1: the source comes only from the session role; a role that is not a registered workload
// is refused for the whole call with OB704 (the only raised error of accept), and so is
// record_send_failures.
func TestIntakeUnregisteredRoleOB704(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	_, err := pgcall.AcceptObservations(ctx, b.Unreg, intakefix.JSON(t, []any{intakefix.Sub(testfix.NewUUID())}))
	if !errors.Is(err, pgcall.ErrNotAWorkload) || pgcall.SQLState(err) != "OB704" {
		t.Fatalf("accept as unregistered role: %v, want OB704", err)
	}
	_, err = pgcall.AcceptObservation(ctx, b.Unreg, intakefix.JSON(t, intakefix.Sub(testfix.NewUUID())))
	if !errors.Is(err, pgcall.ErrNotAWorkload) {
		t.Fatalf("accept_observation as unregistered role: %v", err)
	}
	err = pgcall.RecordSendFailures(ctx, b.Unreg, 1, time.Now().Add(-time.Minute), time.Now(), "timeout")
	if !errors.Is(err, pgcall.ErrNotAWorkload) {
		t.Fatalf("record_send_failures as unregistered role: %v", err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*)::int FROM intake.observation_ids`); n != 0 {
		t.Fatalf("%d rows stored", n)
	}
}

// R-OB-3: accepted observations are immutable (OB202) - no UPDATE, no DELETE outside the purge,
// no TRUNCATE, the owner included - and the registry rows too; observations are ordered by
// (acceptedAt, observationId), never by the producer-claimed time.
func TestIntakeImmutableAndOrdered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{})
	var ids []string
	for i, claimed := range []string{"2030-01-01T00:00:00Z", "1999-01-01T00:00:00Z", "2010-01-01T00:00:00Z"} {
		id := testfix.NewUUID()
		s := intakefix.Sub(id)
		s["sourceClaimedObservedAt"] = claimed
		intakefix.Want(t, intakefix.One(t, b.EdgeA, intakefix.JSON(t, s)), "accepted_new", "")
		ids = append(ids, id)
		_ = i
	}
	owner := testdb.Conn(t, b.Dsn, "outbox_owner")
	for _, q := range []string{
		`UPDATE intake.observations SET accepted_envelope_sha256 = repeat('0', 64)`,
		`DELETE FROM intake.observations`,
		`TRUNCATE intake.observations`,
		`UPDATE intake.observation_ids SET workload_principal_id = 'x'`,
		`DELETE FROM intake.observation_ids`,
		`TRUNCATE intake.observation_ids CASCADE`,
		`UPDATE intake.workloads SET max_per_minute = 1`,
	} {
		if _, err := owner.Exec(ctx, q); pgcall.SQLState(err) != "OB202" {
			t.Errorf("%s: %v, want OB202", q, err)
		}
	}
	rows, err := b.Admin.Query(ctx, `SELECT observation_id::text FROM intake.observations ORDER BY accepted_at, observation_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("order %v, want acceptance order %v", got, ids)
	}
}

// R-OB-2, T-9 "concurrent submitters of one id": 100 real sessions of one workload (fewer when the
// cluster's max_connections leaves less than 50 spare) submit the same new id at one barrier:
// exactly one accepted_new, every other accepted_existing; with 10
// sessions of each of two workloads: exactly one accepted_new, the winner's workload gets
// accepted_existing, the other conflict.
func TestIntakeConcurrentSubmittersOneNew(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	run := func(roles []string) map[string]map[string]int {
		id := testfix.NewUUID()
		doc := intakefix.JSON(t, intakefix.Sub(id))
		conns := make([]*pgx.Conn, len(roles))
		for i, r := range roles {
			conns[i] = testdb.Conn(t, b.Dsn, r)
		}
		var start, done sync.WaitGroup
		start.Add(1)
		outs := make([]pgcall.ObservationOutcome, len(roles))
		errs := make([]error, len(roles))
		for i := range roles {
			done.Add(1)
			go func(i int) {
				defer done.Done()
				start.Wait()
				outs[i], errs[i] = pgcall.AcceptObservation(context.Background(), conns[i], doc)
			}(i)
		}
		start.Done()
		done.Wait()
		res := map[string]map[string]int{}
		for i, r := range roles {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if res[r] == nil {
				res[r] = map[string]int{}
			}
			res[r][outs[i].Outcome]++
		}
		return res
	}
	var maxConns int
	if err := b.Admin.QueryRow(context.Background(), `SELECT current_setting('max_connections')::int`).Scan(&maxConns); err != nil {
		t.Fatal(err)
	}
	same := make([]string, min(100, maxConns-50))
	for i := range same {
		same[i] = intakefix.RoleA
	}
	res := run(same)
	if res[intakefix.RoleA]["accepted_new"] != 1 || res[intakefix.RoleA]["accepted_existing"] != len(same)-1 {
		t.Fatalf("one workload, %d sessions: %v, want 1 accepted_new + %d accepted_existing", len(same), res, len(same)-1)
	}
	mixed := make([]string, 20)
	for i := range mixed {
		mixed[i] = []string{intakefix.RoleA, intakefix.RoleB}[i%2]
	}
	res = run(mixed)
	news := res[intakefix.RoleA]["accepted_new"] + res[intakefix.RoleB]["accepted_new"]
	if news != 1 {
		t.Fatalf("two workloads: %v, want exactly one accepted_new", res)
	}
	winner, loser := intakefix.RoleA, intakefix.RoleB
	if res[intakefix.RoleB]["accepted_new"] == 1 {
		winner, loser = intakefix.RoleB, intakefix.RoleA
	}
	if res[winner]["accepted_existing"] != 9 || res[loser]["conflict"] != 10 {
		t.Fatalf("two workloads: %v, want the winner's 9 others accepted_existing and the other's 10 conflict", res)
	}
}

// HP-1 for accept_observations (SPEC §12a; R-OB-1): on the success path the number of function
// calls per batch is a constant - the same for 10 and for 100 new observations, function by
// function.
func TestIntakeHotPathConstantCalls(t *testing.T) {
	t.Parallel()
	b := intakefix.Setup(t, intakefix.Opts{})
	conn := kernelfix.StatsSession(t, b.Dsn, intakefix.RoleA)
	reader := testdb.Conn(t, b.Dsn, "")
	batch := func(n int) json.RawMessage {
		docs := make([]any, n)
		for i := range docs {
			docs[i] = intakefix.Sub(testfix.NewUUID())
		}
		return intakefix.JSON(t, docs)
	}
	count := func(n int) map[string]int64 {
		docs := batch(n)
		return kernelfix.CountCalls(t, conn, reader, func(tx pgx.Tx) error {
			out, err := pgcall.AcceptObservations(context.Background(), tx, docs)
			if err != nil {
				return err
			}
			for _, o := range out {
				if o.Outcome != "accepted_new" {
					t.Fatalf("%+v", o)
				}
			}
			return nil
		})
	}
	count(3) // warm-up
	small, large := count(10), count(100)
	if small["intake.accept_observations"] != 1 || large["intake.accept_observations"] != 1 {
		t.Fatalf("intake.accept_observations counted %d/%d times: function statistics not collected", small["intake.accept_observations"], large["intake.accept_observations"])
	}
	names := map[string]bool{}
	for n := range small {
		names[n] = true
	}
	for n := range large {
		names[n] = true
	}
	for n := range names {
		if small[n] != large[n] {
			t.Errorf("%s called %d times for 10 items and %d for 100: per-item work on the success path", n, small[n], large[n])
		}
	}
}
