//go:build bench

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/release"
	"github.com/oceanway/pgoutbox/reference"
)

// destinationNames returns the destinations every event of the run is delivered to: the
// reference release's one (metering_input_processor) and, for -destinations N > 1, N-1 more of
// the same kind (metering_input_processor_2 …), all mandatory (the scale curve, SPEC R-DP-9).
func destinationNames(n int) []string {
	out := []string{destination}
	for i := 2; i <= n; i++ {
		out = append(out, destination+"_"+strconv.Itoa(i))
	}
	return out
}

// activateRelease registers and activates, as outbox_registrar, the reference release; with
// more than one destination it first registers the extra destinations (copies of
// metering_input_processor's registry row under other names) and adds one mandatory member per
// extra destination for the bench's event type, so each appended event gets len(dests)
// deliveries.
func activateRelease(ctx context.Context, dsn string, dests []string) error {
	if len(dests) <= 1 {
		return activateReference(ctx, dsn)
	}
	conn, err := connect(ctx, dsn, "outbox_registrar")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var base pgcall.DestinationParams
	for _, d := range reference.Destinations() {
		if d.Destination == destination {
			base = d
		}
	}
	if base.Destination == "" {
		return fmt.Errorf("the reference registry has no destination %s", destination)
	}
	raw, err := reference.Releases.ReadFile(reference.ReleasePath)
	if err != nil {
		return err
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		return err
	}
	members, _ := def["members"].([]any)
	var model map[string]any
	for _, m := range members {
		x, _ := m.(map[string]any)
		if x["eventType"] == eventType && x["destination"] == destination {
			model = x
		}
	}
	if model == nil {
		return fmt.Errorf("the reference release has no member %s → %s", eventType, destination)
	}
	for i, d := range dests[1:] {
		p := base
		p.Destination, p.ConsumerName = d, base.ConsumerName+"_"+strconv.Itoa(i+2)
		if err := pgcall.RegisterDestination(ctx, conn, p); err != nil {
			return fmt.Errorf("destination %s: %w", d, err)
		}
		m := map[string]any{}
		for k, v := range model {
			m[k] = v
		}
		m["destination"], m["consumerName"], m["mandatory"] = p.Destination, p.ConsumerName, true
		members = append(members, m)
	}
	key := func(m any) string {
		x := m.(map[string]any)
		return fmt.Sprint(x["eventType"], "\x00", x["eventSchemaVersion"], "\x00", x["destination"], "\x00", x["consumerName"])
	}
	sort.Slice(members, func(i, j int) bool { return key(members[i]) < key(members[j]) })
	def["members"], def["memberCount"] = members, len(members)
	b, err := json.Marshal(def)
	if err != nil {
		return err
	}
	doc, err := release.WithDigest(b)
	if err != nil {
		return err
	}
	q, err := pgcall.RegisterDeliverySet(ctx, conn, doc, reference.SourceRelease+"-bench-"+strconv.Itoa(len(dests))+"dest")
	if err != nil {
		return err
	}
	return pgcall.ActivateDeliverySet(ctx, conn, q)
}
