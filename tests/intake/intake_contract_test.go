package intake

// The intake contract as SPEC states it (issue 37): the R-OB-1 name grammar (the seed's type
// names, namespaced names, member names of any script stored in NFC, collisions after NFC
// refused), the R-OB-4 ack fence (a finished lease's token is OB001, a second ack included) and
// R-OB-5's exact health windows (any start, any width; no coarser bucket moves an event into a
// neighbouring window).

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/intakefix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// cafeSchema is a schema with one non-ASCII member name, spelled in the given normalization form.
func cafeSchema(form norm.Form) json.RawMessage {
	name := form.String("café")
	b, _ := json.Marshal(map[string]any{"members": map[string]any{
		name:   map[string]any{"type": "string", "required": true},
		"size": map[string]any{"type": "integer"},
	}})
	return b
}

// R-OB-1: the seed's names and a namespaced name register; a member named café is one member
// whether the definition or the body spells it in NFD or NFC (one schema digest, one submission
// digest); a definition whose names collide after NFC, a type outside the grammar and a member
// name with a control character are OB702; the test schema registered before keeps working.
func TestObservationNameGrammar(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 1000, MaxBodyBytes: 16384})
	simple := json.RawMessage(`{"members":{"requestId":{"type":"string","required":true}}}`)
	for _, name := range []string{"RequestAttempt", "ErrorOccurrence", "GatewayDiagnostic", "edge.request_attempt", "a-b_c.D9",
		"T" + strings.Repeat("x", 127)} {
		if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, name, 1, simple); err != nil {
			t.Fatalf("type %q: %v", name, err)
		}
	}
	for _, name := range []string{"", "1abc", "_x", ".edge", "edge request", "edge/req", "café", "T" + strings.Repeat("x", 128)} {
		if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, name, 1, simple); pgcall.SQLState(err) != "OB702" {
			t.Fatalf("type %q: %v, want OB702", name, err)
		}
	}
	nfc, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.cafe", 1, cafeSchema(norm.NFC))
	testfix.Must(t, err)
	nfd, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.cafe", 1, cafeSchema(norm.NFD))
	if err != nil || nfd != nfc {
		t.Fatalf("the NFD spelling of the same definition: %s %v, want the NFC digest %s", nfd, err, nfc)
	}
	nfd2, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.cafe", 2, cafeSchema(norm.NFD))
	if err != nil || nfd2 != nfc {
		t.Fatalf("a definition first registered in NFD: %s %v, want the NFC digest", nfd2, err)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_schema_members
		WHERE observation_type = 'edge.cafe' AND member = normalize($1, NFC) AND member = $1`, norm.NFC.String("café")); n != 2 {
		t.Fatalf("%d stored NFC member names, want 2 (one per version)", n)
	}
	collide, _ := json.Marshal(map[string]any{"members": map[string]any{
		norm.NFC.String("café"): map[string]any{"type": "string"},
		norm.NFD.String("café"): map[string]any{"type": "string"},
	}})
	if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.collide", 1, collide); pgcall.SQLState(err) != "OB702" {
		t.Fatalf("names colliding after NFC: %v, want OB702", err)
	}
	for _, m := range []string{"bad\u0007name", "bad\u0085name", strings.Repeat("m", 65)} {
		def, _ := json.Marshal(map[string]any{"members": map[string]any{m: map[string]any{"type": "string"}}})
		if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.badmember", 1, def); pgcall.SQLState(err) != "OB702" {
			t.Fatalf("member %q: %v, want OB702", m, err)
		}
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_schemas WHERE observation_type IN ('edge.collide', 'edge.badmember')`); n != 0 {
		t.Fatal("a refused definition was stored")
	}
	// a member of 64 characters of another script is fine
	long, _ := json.Marshal(map[string]any{"members": map[string]any{strings.Repeat("é", 64): map[string]any{"type": "boolean"}}})
	if _, err := pgcall.RegisterObservationSchema(ctx, b.Reg, "edge.long", 1, long); err != nil {
		t.Fatalf("64-character member name: %v", err)
	}

	// bodies: the same observation with café in NFC, then in NFD, is one submission digest
	id := testfix.NewUUID()
	sub := func(form norm.Form, typ string) json.RawMessage {
		return intakefix.JSON(t, map[string]any{"observationId": id, "observationType": typ, "observationSchemaVersion": 1,
			"body": map[string]any{form.String("café"): "crème", "size": 2}})
	}
	first := intakefix.One(t, b.EdgeA, sub(norm.NFC, "edge.cafe"))
	intakefix.Want(t, first, "accepted_new", "")
	second := intakefix.One(t, b.EdgeA, sub(norm.NFD, "edge.cafe"))
	intakefix.Want(t, second, "accepted_existing", "")
	if second.SubmissionPayloadSHA256 != first.SubmissionPayloadSHA256 {
		t.Fatalf("NFD body digest %s, NFC %s: want one digest", second.SubmissionPayloadSHA256, first.SubmissionPayloadSHA256)
	}
	// the canonical body holds the NFC name
	var canon string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT accepted_envelope_canonical FROM intake.observations WHERE observation_id = $1::uuid`, id).Scan(&canon))
	if !strings.Contains(canon, `"`+norm.NFC.String("café")+`":"`+norm.NFC.String("crème")+`"`) {
		t.Fatalf("canonical envelope %s: want the NFC member name and value", canon)
	}
	// the seed's type names are submitted like any other; the schema registered before still works
	intakefix.Want(t, intakefix.One(t, b.EdgeA, intakefix.JSON(t, map[string]any{"observationId": testfix.NewUUID(),
		"observationType": "RequestAttempt", "observationSchemaVersion": 1, "body": map[string]any{"requestId": "r-1"}})), "accepted_new", "")
	intakefix.Want(t, intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(testfix.NewUUID()))), "accepted_new", "")
}

// R-OB-4: ack_observations is fenced like ack_deliveries. One batch mixes a live token, a stale
// token, the token of a lease that already finished (acknowledged before) and the live token a
// second time: only the first live item is acknowledged, every other is OB001 and nothing of a
// finished work row changes.
func TestAckObservationsFinishedLeaseOB001(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := opSetup(t)
	testfix.Must(t, pgcall.RegisterObservationProjector(ctx, b.Reg, opConsumer, opProjection, 1))
	intakefix.AcceptN(t, b.EdgeA, 3)
	cs := opClaim(t, b.proj, 10)
	if len(cs) != 3 {
		t.Fatalf("claimed %d, want 3", len(cs))
	}
	for _, c := range cs {
		if _, err := pgcall.RecordObservationReceipt(ctx, b.cons, opConsumer, opProjection, 1, c.ObservationID, c.AcceptedEnvelopeSHA256); err != nil {
			t.Fatal(err)
		}
	}
	if o := opAckOne(t, b.proj, opAck(cs[0])); o.Outcome != "acknowledged" {
		t.Fatalf("first ack: %+v", o)
	}
	var ackedAt time.Time
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT acknowledged_at FROM intake.observation_deliveries WHERE observation_id = $1::uuid`, cs[0].ObservationID).Scan(&ackedAt))
	// the finished lease's token again, alone: OB001, never acknowledged again
	if o := opAckOne(t, b.proj, opAck(cs[0])); o.Outcome != "rejected" || o.SQLState != "OB001" || o.Detail != "finished" {
		t.Fatalf("second ack of a finished lease: %+v, want rejected OB001 finished", o)
	}
	stale := opAck(cs[2])
	stale.LeaseToken = testfix.NewUUID()
	out, err := pgcall.AckObservations(ctx, b.proj, []pgcall.ObservationAck{opAck(cs[1]), stale, opAck(cs[0]), opAck(cs[1])})
	testfix.Must(t, err)
	want := []struct{ outcome, state, detail string }{
		{"acknowledged", "", ""},
		{"rejected", "OB001", "stale_token"},
		{"rejected", "OB001", "finished"},
		{"rejected", "OB001", "finished"},
	}
	for i, w := range want {
		if out[i].Outcome != w.outcome || out[i].SQLState != w.state || out[i].Detail != w.detail {
			t.Fatalf("item %d: %+v, want %s/%s/%s", i, out[i], w.outcome, w.state, w.detail)
		}
	}
	var again time.Time
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT acknowledged_at FROM intake.observation_deliveries WHERE observation_id = $1::uuid`, cs[0].ObservationID).Scan(&again))
	if !again.Equal(ackedAt) {
		t.Fatalf("a rejected ack changed the finished row: %s -> %s", ackedAt, again)
	}
	if n := intakefix.Count(t, b.Admin, `SELECT count(*) FROM intake.observation_deliveries WHERE status = 'leased' AND observation_id = $1::uuid`, cs[2].ObservationID); n != 1 {
		t.Fatal("the stale token changed the live lease")
	}
}

// R-OB-5: windows are exact for any start and width. Event A (an acceptance) and event B (a
// rejection, and a send-failure report starting at B's time) lie a few milliseconds apart; a
// window boundary between them, at a start aligned to no minute, keeps A in the window before it
// and B in the window after it for widths of 1 s, 7 min and 1 h. The quota keeps counting in its
// own minute rows.
func TestHealthWindowsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := intakefix.Setup(t, intakefix.Opts{MaxPerMinute: 1000, MaxBodyBytes: 16384})
	a := intakefix.One(t, b.EdgeA, intakefix.JSON(t, intakefix.Sub(testfix.NewUUID())))
	intakefix.Want(t, a, "accepted_new", "")
	time.Sleep(5 * time.Millisecond)
	bad := intakefix.Sub(testfix.NewUUID())
	bad["body"].(map[string]any)["unknownMember"] = 1
	rej := intakefix.One(t, b.EdgeA, intakefix.JSON(t, bad))
	intakefix.Want(t, rej, "rejected", "OB702")
	var tb time.Time
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT max(rejected_at) FROM intake.intake_rejections WHERE workload_principal_id = $1`, intakefix.WorkloadA).Scan(&tb))
	if !tb.After(a.AcceptedAt) {
		t.Fatalf("rejection at %s not after the acceptance at %s", tb, a.AcceptedAt)
	}
	testfix.Must(t, pgcall.RecordSendFailures(ctx, b.EdgeA, 3, tb, tb.Add(time.Millisecond), "network"))
	mid := a.AcceptedAt.Add(tb.Sub(a.AcceptedAt) / 2).Truncate(time.Microsecond)
	if mid.Truncate(time.Minute).Equal(mid) {
		t.Fatal("the boundary happens to be aligned to a minute; run again")
	}
	for _, width := range []time.Duration{time.Second, 7 * time.Minute, time.Hour} {
		ws, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, mid.Add(-width), mid.Add(width), width)
		testfix.Must(t, err)
		var mine []pgcall.HealthWindow
		for _, w := range ws {
			if w.WorkloadPrincipalID == intakefix.WorkloadA {
				mine = append(mine, w)
			}
		}
		if len(mine) != 2 {
			t.Fatalf("width %s: %d windows, want 2", width, len(mine))
		}
		before, after := mine[0], mine[1]
		if !before.WindowEnd.Equal(mid) || !after.WindowStart.Equal(mid) {
			t.Fatalf("width %s: windows %s..%s and %s..%s, want the boundary at %s", width, before.WindowStart, before.WindowEnd, after.WindowStart, after.WindowEnd, mid)
		}
		if before.Accepted != 1 || before.IntakeRejections != 0 || before.SendFailures != 0 || before.Health != "healthy" || !before.LastAcceptedAt.Equal(a.AcceptedAt) {
			t.Fatalf("width %s: window before the boundary %+v, want the acceptance only (healthy)", width, before)
		}
		if after.Accepted != 0 || after.IntakeRejections != 1 || after.SendFailures != 3 || after.Health != "degraded" {
			t.Fatalf("width %s: window after the boundary %+v, want the rejection and the 3 send failures only", width, after)
		}
	}
	// a boundary just after the rejection moves it back: exact to the microsecond
	ws, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, tb.Add(time.Microsecond-time.Second), tb.Add(time.Microsecond+time.Second), time.Second)
	testfix.Must(t, err)
	for _, w := range ws {
		if w.WorkloadPrincipalID == intakefix.WorkloadA && w.WindowEnd.Equal(tb.Add(time.Microsecond)) && w.IntakeRejections != 1 {
			t.Fatalf("window ending 1 µs after the rejection: %+v, want the rejection in it", w)
		}
	}
	if _, err := pgcall.AcceptedHealthWindows(ctx, b.Auditor, mid, mid.Add(time.Second), 0); pgcall.SQLState(err) != "22023" {
		t.Fatalf("zero width: %v, want 22023", err)
	}
	// the quota's own accounting: one accepted in its minute rows
	if n := intakefix.Count(t, b.Admin, `SELECT coalesce(sum(accepted), 0)::int FROM intake.workload_minutes WHERE workload_principal_id = $1`, intakefix.WorkloadA); n != 1 {
		t.Fatalf("quota minute rows count %d accepted, want 1", n)
	}
}
