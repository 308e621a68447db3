package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/wire"
)

// BrokerReceiptKind is the receipt kind the dispatcher builds from a JetStream PubAck (SPEC
// R-AK-1); its type, schema version and members are the database's (receipt.Catalog).
const BrokerReceiptKind = string(receipt.BrokerPublication)

// JetStreamOptions configure one JetStream destination.
type JetStreamOptions struct {
	URL     string
	Subject string
	// Stream, when set, must be the stream that stores Subject; a PubAck from any other stream
	// is a transport error.
	Stream  string
	Timeout time.Duration
	Auth    string // config.AuthNone | config.AuthToken
	Secret  config.Secret
	// Name is the NATS connection name (the worker name).
	Name string
}

// JetStream publishes the canonical envelope to a subject with Nats-Msg-Id = event id, so that
// JetStream de-duplicates re-publications within the stream's duplicate window, and turns the
// PubAck into a BrokerPublicationReceipt and an ActiveConsumerAck@1. The resulting ack means:
// the broker stored the event (once per duplicate window); it says nothing about any downstream
// consumer having applied it (docs/dispatcher.md, "JetStream").
type JetStream struct {
	opts JetStreamOptions
	nc   *nats.Conn
	js   jetstream.JetStream
	now  func() time.Time
	// receipts is the receipt catalog the broker receipts are built with, loaded from the
	// database by the dispatcher's preflight (SetReceiptCatalog).
	receipts atomic.Pointer[receipt.Catalog]
}

// SetReceiptCatalog sets the catalog broker receipts are built with.
func (j *JetStream) SetReceiptCatalog(c *receipt.Catalog) { j.receipts.Store(c) }

// NewJetStream connects to NATS. The connection reconnects by itself for the process lifetime.
func NewJetStream(opts JetStreamOptions) (*JetStream, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.Timeout(opts.Timeout),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
	}
	if opts.Auth == config.AuthToken {
		nopts = append(nopts, nats.Token(string(opts.Secret.Bytes())))
	}
	nc, err := nats.Connect(opts.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream transport: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream transport: %w", err)
	}
	return &JetStream{opts: opts, nc: nc, js: js, now: time.Now}, nil
}

// Deliver publishes and builds the receipt and ack from the PubAck.
func (j *JetStream) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	cat := j.receipts.Load()
	if cat == nil {
		return wire.Result{}, errors.New("jetstream transport: no receipt catalog loaded (dispatcher preflight)")
	}
	if info, ok := cat.Lookup(receipt.BrokerPublication); !ok || d.ExpectedReceiptType != info.ReceiptType ||
		d.ExpectedReceiptSchemaVersion != info.SchemaVersion {
		return wire.Result{}, fmt.Errorf("jetstream transport: destination %s expects %s@%d, not a broker receipt",
			d.Destination, d.ExpectedReceiptType, d.ExpectedReceiptSchemaVersion)
	}
	ctx, cancel := context.WithTimeout(ctx, j.opts.Timeout)
	defer cancel()
	msg := nats.NewMsg(j.opts.Subject)
	msg.Data = d.Envelope
	msg.Header.Set(jetstream.MsgIDHeader, d.EventID)
	msg.Header.Set(wire.HeaderDestination, d.Destination)
	msg.Header.Set(wire.HeaderConsumer, d.ConsumerName)
	msg.Header.Set(wire.HeaderEventID, d.EventID)
	msg.Header.Set(wire.HeaderEnvelopeSHA256, d.EnvelopeSHA256)
	setNATSTrace(msg.Header, d)
	var popts []jetstream.PublishOpt
	if j.opts.Stream != "" {
		popts = append(popts, jetstream.WithExpectStream(j.opts.Stream))
	}
	pa, err := j.js.PublishMsg(ctx, msg, popts...)
	if err != nil {
		return wire.Result{}, fmt.Errorf("jetstream transport: publish: %w", err)
	}
	if j.opts.Stream != "" && pa.Stream != j.opts.Stream {
		return wire.Result{}, fmt.Errorf("jetstream transport: PubAck from stream %q, configured %q", pa.Stream, j.opts.Stream)
	}
	ack, receipt, err := BrokerReceipt(cat, d, pa.Stream, pa.Sequence, pa.Duplicate, j.now())
	if err != nil {
		return wire.Result{}, err
	}
	return wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: receipt}, nil
}

// BrokerReceipt builds the BrokerPublicationReceipt document of a PubAck and the
// ActiveConsumerAck@1 that refers to it (SPEC R-AK-1, R-AK-1a) with the receipt package, like
// any consumer, with the catalog loaded from the database; the ref is "<stream>:<sequence>".
func BrokerReceipt(cat *receipt.Catalog, d wire.Delivery, stream string, sequence uint64, duplicate bool, at time.Time) (ack, doc json.RawMessage, err error) {
	if cat == nil {
		return nil, nil, errors.New("jetstream transport: no receipt catalog loaded (dispatcher preflight)")
	}
	if stream == "" {
		return nil, nil, errors.New("jetstream transport: PubAck without stream")
	}
	if sequence == 0 || sequence > canon.MaxSafeInteger {
		return nil, nil, fmt.Errorf("jetstream transport: PubAck sequence %d outside 1..2^53-1", sequence)
	}
	built, err := cat.Build(receipt.BrokerPublication, receipt.Params{
		Ref:         stream + ":" + strconv.FormatUint(sequence, 10),
		Destination: d.Destination, ConsumerName: d.ConsumerName, EventID: d.EventID,
		EventEnvelopeSHA256: d.EnvelopeSHA256, Time: at,
		Fields: receipt.BrokerFields(stream, sequence, duplicate),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream transport: receipt: %w", err)
	}
	return built.Ack, built.Receipt, nil
}

// Close drains nothing (publishes are synchronous) and closes the connection.
func (j *JetStream) Close() error {
	j.nc.Close()
	return nil
}
