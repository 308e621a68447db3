package soak

import "github.com/oceanway/pgoutbox/reference/scenario"

// EventsPerRun is the size of one business run of the soak: the reference scenario
// (internal/scenario) with identifiers unique per producer, so concurrent producers never share
// an aggregate, an operation or a correlation.
const EventsPerRun = scenario.EventsPerRun

// DeliveriesPerRun is the number of mandatory deliveries one run creates.
const DeliveriesPerRun = scenario.DeliveriesPerRun
