// A minimal, complete pgoutbox HTTP consumer in Node.js, written from docs/transport-http.md,
// docs/contract.md and contracts/ alone (docs/write-your-own-consumer.md walks through it).
//
// It serves one destination: verifies the v1 HMAC signature (timestamp window, replay cache) or
// a bearer token, checks the body against its digest header, validates the envelope with the
// published EventEnvelope@1 schema and checks that the body is its RFC 8785 canonical form,
// "applies" the event (here: remembers it), builds the receipt and its jcs-sha256-v1 digest,
// validates receipt and ack with the published schemas, and answers 200 {ack, receipt}.
// A redelivery of an applied event is answered with the stored receipt.
//
// Receipts live in memory here. A real consumer stores the receipt in its own database in the
// same transaction as its effect, keyed by event id, and answers a redelivery from there.
//
// Environment:
//   PORT                      listen port (default 8091; 0 = any free port)
//   PGOUTBOX_HMAC_SECRET      shared secret of the destination's auth = "hmac"
//   PGOUTBOX_BEARER_TOKEN     token of auth = "bearer" (one of the two is required)
//   DESTINATION, CONSUMER_NAME, RECEIPT_KIND   default: the metering_input_processor destination
//   SUPPORTED_EVENTS          comma-separated eventType=eventSchemaVersion pairs
//   SIGNATURE_WINDOW_SECONDS  default 300
//   MAX_BODY_BYTES            default 4194304
//   CONTRACTS_DIR             the published schemas (default ../../contracts/schemas)
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import canonicalize from 'canonicalize';

const here = dirname(fileURLToPath(import.meta.url));
const env = (name, def) => process.env[name] ?? def;

// The receipt kinds of the reference release (docs/contract.md, "Receipt kinds").
const KINDS = {
  operations_projection: { type: 'OperationsProjectionAppliedReceipt', prefix: 'operationsProjectionAppliedReceipt', time: 'appliedAt' },
  metering_input_processor: { type: 'MeteringInputProcessorConsumerReceipt', prefix: 'meteringInputProcessorConsumerReceipt', time: 'committedAt' },
  billing_finalization_coordinator: { type: 'BillingFinalizationCoordinatorConsumerReceipt', prefix: 'billingFinalizationCoordinatorConsumerReceipt', time: 'committedAt' },
  billing_settlement_catch_up: { type: 'BillingSettlementCatchUpConsumerReceipt', prefix: 'billingSettlementCatchUpConsumerReceipt', time: 'committedAt' },
};

const cfg = {
  port: Number(env('PORT', '8091')),
  secret: env('PGOUTBOX_HMAC_SECRET', ''),
  token: env('PGOUTBOX_BEARER_TOKEN', ''),
  destination: env('DESTINATION', 'metering_input_processor'),
  consumerName: env('CONSUMER_NAME', 'metering_input_processor_consumer'),
  kind: env('RECEIPT_KIND', 'metering_input_processor'),
  supported: new Set(env('SUPPORTED_EVENTS',
    'execution.attempt-eligibility.finalized@1=1,gateway.evidence-availability.current-changed@1=1').split(',').map((s) => s.trim()).filter(Boolean)),
  windowSeconds: Number(env('SIGNATURE_WINDOW_SECONDS', '300')),
  maxBodyBytes: Number(env('MAX_BODY_BYTES', String(4 << 20))),
  contractsDir: env('CONTRACTS_DIR', join(here, '..', '..', 'contracts', 'schemas')),
};
const kind = KINDS[cfg.kind];
if (!kind) throw new Error(`RECEIPT_KIND ${cfg.kind} is not a consumer receipt kind`);
if (!cfg.secret && !cfg.token) throw new Error('set PGOUTBOX_HMAC_SECRET or PGOUTBOX_BEARER_TOKEN');

// The published schemas, draft 2020-12, formats asserted (date-time is part of the contract).
const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats(ajv);
for (const f of readdirSync(cfg.contractsDir).filter((f) => f.endsWith('.schema.json'))) {
  ajv.addSchema(JSON.parse(readFileSync(join(cfg.contractsDir, f), 'utf8')), f.replace('.schema.json', ''));
}
const validEnvelope = ajv.getSchema('EventEnvelope@1');
const validAck = ajv.getSchema('ActiveConsumerAck@1');
const validReceipt = ajv.getSchema(`${kind.type}@1`);

const sha256hex = (buf) => createHash('sha256').update(buf).digest('hex');

// ---- authentication (docs/transport-http.md, "Signature") --------------------------------
const SIGNED_HEADERS = ['pgoutbox-destination', 'pgoutbox-consumer', 'pgoutbox-event-id', 'pgoutbox-attempt-id',
  'pgoutbox-attempt-number', 'pgoutbox-event-envelope-sha256', 'pgoutbox-expected-receipt-type',
  'pgoutbox-expected-receipt-schema-version', 'pgoutbox-required-projection'];
const seen = new Map(); // MAC hex -> unix second after which it is stale anyway

function parseSignature(value) {
  const m = /^t=([0-9]{1,12}),v1=([0-9a-f]{64})$/.exec(value ?? '');
  return m ? { t: Number(m[1]), mac: m[2] } : null;
}

function signingString(t, headers, body) {
  return ['pgoutbox-hmac-v1', String(t), ...SIGNED_HEADERS.map((h) => headers[h] ?? ''), sha256hex(body)].join('\n');
}

// Before the body is read: a bearer token, or a fresh, not yet seen signature. Returns
// {ok, ref, sig}; sig must still be checked against the body.
function preAuthenticate(headers) {
  if (cfg.token && headers.authorization?.startsWith('Bearer ')) {
    const got = Buffer.from(headers.authorization.slice(7));
    const want = Buffer.from(cfg.token);
    if (got.length === want.length && timingSafeEqual(got, want)) return { ok: true };
  }
  if (!cfg.secret) return { ok: false };
  const sig = parseSignature(headers['pgoutbox-signature']);
  if (!sig) return { ok: false };
  const now = Math.floor(Date.now() / 1000);
  if (Math.abs(now - sig.t) > cfg.windowSeconds) return { ok: false, ref: 'stale_signature' };
  if ((seen.get(sig.mac) ?? -1) >= now) return { ok: false, ref: 'replayed_signature' };
  return { ok: true, sig };
}

function verifySignature(sig, headers, body) {
  const want = createHmac('sha256', cfg.secret).update(signingString(sig.t, headers, body)).digest();
  if (!timingSafeEqual(Buffer.from(sig.mac, 'hex'), want)) return { ok: false };
  const now = Math.floor(Date.now() / 1000);
  for (const [k, exp] of seen) if (exp < now) seen.delete(k);
  if ((seen.get(sig.mac) ?? -1) >= now) return { ok: false, ref: 'replayed_signature' };
  seen.set(sig.mac, sig.t + cfg.windowSeconds);
  return { ok: true };
}

// ---- receipts (docs/contract.md, "Receipt document and digest") ---------------------------
const receipts = new Map(); // eventId -> receipt document (a real consumer: its database)

const nowRFC3339Micro = () => new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

function buildReceipt(envelope, headers) {
  const p = kind.prefix;
  const receipt = {
    [`${p}Ref`]: `${cfg.consumerName}:${envelope.eventId}`,
    [`${p}SchemaVersion`]: Number(headers['pgoutbox-expected-receipt-schema-version']),
    [`${p}DigestAlgorithmVersion`]: 'jcs-sha256-v1',
    destination: cfg.destination,
    consumerName: cfg.consumerName,
    eventId: envelope.eventId,
    eventEnvelopeDigestAlgorithmVersion: 'jcs-sha256-v1',
    eventEnvelopeSha256: headers['pgoutbox-event-envelope-sha256'],
    [kind.time]: nowRFC3339Micro(),
  };
  if (cfg.kind === 'operations_projection') {
    // "name@version": the version follows the LAST '@' (a name may contain '@').
    const proj = headers['pgoutbox-required-projection'] ?? '';
    const at = proj.lastIndexOf('@');
    receipt.projectionName = proj.slice(0, at);
    receipt.projectionVersion = Number(proj.slice(at + 1));
    receipt.eventType = envelope.eventType;
    receipt.eventSchemaVersion = envelope.eventSchemaVersion;
    receipt.projectionOutcome = 'applied';
  } else {
    receipt.consumerOutcome = 'applied';
  }
  // The digest covers the receipt minus <prefix>Ref, <prefix>Digest and the time field.
  const candidate = { ...receipt };
  delete candidate[`${p}Ref`];
  delete candidate[kind.time];
  receipt[`${p}Digest`] = sha256hex(canonicalize(candidate));
  return receipt;
}

function ackFor(receipt) {
  const p = kind.prefix;
  return {
    destination: receipt.destination,
    consumerName: receipt.consumerName,
    eventId: receipt.eventId,
    eventEnvelopeDigestAlgorithmVersion: receipt.eventEnvelopeDigestAlgorithmVersion,
    eventEnvelopeSha256: receipt.eventEnvelopeSha256,
    appliedReceipt: {
      kind: cfg.kind,
      [`${p}Ref`]: receipt[`${p}Ref`],
      [`${p}SchemaVersion`]: receipt[`${p}SchemaVersion`],
      [`${p}DigestAlgorithmVersion`]: receipt[`${p}DigestAlgorithmVersion`],
      [`${p}Digest`]: receipt[`${p}Digest`],
    },
  };
}

// ---- the handler ----------------------------------------------------------------------------
function answer(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(text);
}

function handle(req, res, body) {
  const h = req.headers;
  // The body must be the bytes the digest header names (else: not what the producer verified).
  if (sha256hex(body) !== h['pgoutbox-event-envelope-sha256']) return answer(res, 422, { code: 'digest_conflict', ref: 'body_digest' });
  let envelope;
  try {
    envelope = JSON.parse(body.toString('utf8'));
  } catch {
    return answer(res, 422, { code: 'envelope_invalid', ref: 'not_json' });
  }
  if (!validEnvelope(envelope)) return answer(res, 422, { code: 'envelope_invalid', ref: 'schema' });
  if (canonicalize(envelope) !== body.toString('utf8')) return answer(res, 422, { code: 'envelope_invalid', ref: 'not_canonical' });
  if (envelope.eventId !== h['pgoutbox-event-id'] || h['pgoutbox-destination'] !== cfg.destination ||
      h['pgoutbox-consumer'] !== cfg.consumerName || h['pgoutbox-expected-receipt-type'] !== kind.type) {
    return answer(res, 422, { code: 'consumer_rejected', ref: 'misaddressed' });
  }
  if (!cfg.supported.has(`${envelope.eventType}=${envelope.eventSchemaVersion}`)) {
    const knownType = [...cfg.supported].some((s) => s.startsWith(`${envelope.eventType}=`));
    return answer(res, 422, { code: knownType ? 'unsupported_schema' : 'unknown_event_type', ref: 'event_type' });
  }
  let receipt = receipts.get(envelope.eventId);
  if (receipt && receipt.eventEnvelopeSha256 !== h['pgoutbox-event-envelope-sha256']) {
    return answer(res, 409, { code: 'receipt_conflict', ref: 'other_digest' });
  }
  if (!receipt) {
    // Apply the event here (in a real consumer: its effect and the receipt in one transaction).
    receipt = buildReceipt(envelope, h);
    if (!validReceipt(receipt)) return answer(res, 503, { code: 'consumer_unavailable', ref: 'receipt_schema' });
    receipts.set(envelope.eventId, receipt);
  }
  const ack = ackFor(receipt);
  if (!validAck(ack)) return answer(res, 503, { code: 'consumer_unavailable', ref: 'ack_schema' });
  return answer(res, 200, { ack, receipt });
}

const server = createServer((req, res) => {
  if (req.method !== 'POST') return answer(res, 405, { code: 'method_not_allowed' });
  if (Number(req.headers['content-length'] ?? 0) > cfg.maxBodyBytes) return answer(res, 413, { code: 'body_too_large' });
  const pre = preAuthenticate(req.headers);
  if (!pre.ok) {
    res.setHeader('connection', 'close');
    return answer(res, 401, { code: 'unauthorized', ...(pre.ref ? { ref: pre.ref } : {}) });
  }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > cfg.maxBodyBytes) {
      answer(res, 413, { code: 'body_too_large' });
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (res.writableEnded) return;
    const body = Buffer.concat(chunks);
    if (pre.sig) {
      const v = verifySignature(pre.sig, req.headers, body);
      if (!v.ok) return answer(res, 401, { code: 'unauthorized', ...(v.ref ? { ref: v.ref } : {}) });
    }
    try {
      handle(req, res, body);
    } catch (err) {
      console.error('delivery failed:', err.message);
      answer(res, 503, { code: 'consumer_unavailable' });
    }
  });
});

server.listen(cfg.port, '127.0.0.1', () => {
  // The test (tests/e2e/node_consumer_test.go) reads this line to learn the port.
  console.log(`pgoutbox node consumer for ${cfg.destination} listening on 127.0.0.1:${server.address().port}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
