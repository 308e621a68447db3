package transport

import (
	"errors"
	"fmt"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/wire"
)

// Build creates the built-in transport of every configured destination. inProcess holds the
// consumers an embedding program registers for destinations with transport "inprocess"; a
// configured in-process destination without one is an error (so is a registered consumer nobody
// configured). Destinations with transport "custom" are left out: the embedding program adds its
// own transport for them to the map it passes to dispatcher.New.
func Build(cfg *config.Config, inProcess map[string]wire.Consumer) (map[string]Transport, error) {
	out := make(map[string]Transport, len(cfg.Destinations))
	closeAll := func() {
		for _, t := range out {
			_ = t.Close()
		}
	}
	var ip *InProcess
	for _, name := range cfg.DestinationNames() {
		d := cfg.Destinations[name]
		switch d.Transport {
		case config.TransportCustom:
			continue
		case config.TransportInProcess:
			if _, ok := inProcess[name]; !ok {
				closeAll()
				return nil, fmt.Errorf("destination %s: transport inprocess but no in-process consumer is registered in this program", name)
			}
			if ip == nil {
				ip = NewInProcess(inProcess)
			}
			out[name] = ip
		case config.TransportHTTP:
			h, err := NewHTTP(HTTPOptions{URL: d.URL, Timeout: d.Timeout, Auth: d.Auth, Secret: d.Secret, MaxResponseBytes: d.MaxResponseBytes,
				Signature: d.Signature, MaxInFlight: cfg.DestinationConcurrency(name)})
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("destination %s: %w", name, err)
			}
			out[name] = h
		case config.TransportJetStream:
			j, err := NewJetStream(JetStreamOptions{URL: d.NATSURL, Subject: d.Subject, Stream: d.Stream, Timeout: d.Timeout, Auth: d.Auth, Secret: d.Secret, Name: cfg.WorkerName})
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("destination %s: %w", name, err)
			}
			out[name] = j
		default:
			closeAll()
			return nil, fmt.Errorf("destination %s: unknown transport %q", name, d.Transport)
		}
	}
	for name := range inProcess {
		if d, ok := cfg.Destinations[name]; !ok || d.Transport != config.TransportInProcess {
			closeAll()
			return nil, errors.New("in-process consumer registered for " + name + ", which is not configured with transport inprocess")
		}
	}
	return out, nil
}
