/**
 * Hostile input: offers, receipts and job frames mutated at random (seeded, so a failure
 * reproduces). Each must be rejected with a reason — never a throw, never a hang — and nothing may
 * be charged: no receipt on either side, no ledger entry, the pod never asked to run a job whose
 * ticket did not check out.
 */
import type { Stream } from '@libp2p/interface';
import { lpStream, streamPair } from '@libp2p/utils';
import { describe, expect, it } from 'vitest';
import type { ServeRequest } from '../../src/requests/request.js';
import { decodeRequesterFrame, decodeServerFrame, encodeFrame } from '../../src/network/job-frames.js';
import { JobFailure, requestJob, serveJob } from '../../src/network/job-protocol.js';
import { Ledger } from '../../src/network/ledger.js';
import { signOffer, verifyOffer } from '../../src/network/offer.js';
import { newJobId, signAck, signResult, signTicket, verifyReceipt } from '../../src/network/receipts.js';
import { NETWORK, newSigner, offerBody } from './fixtures.js';

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    // xorshift32
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

const ODD: unknown[] = [null, 0, -1, 1.5, 2 ** 60, Number.MAX_SAFE_INTEGER, '', 'x'.repeat(70_000), [], {}, true, '12D3KooW', { __proto__: { admin: true } }, [[[[]]]]];

/** Structural mutation of a JSON value: swap in odd values, drop, rename or add fields, re-type leaves. */
function mutate(v: unknown, r: () => number, depth = 0): unknown {
  if (depth > 0 && r() < 0.06) return ODD[Math.floor(r() * ODD.length)];
  if (Array.isArray(v)) return r() < 0.1 ? [...v, ...v] : v.map((x) => mutate(x, r, depth + 1));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const p = r();
      if (p < 0.04) continue;
      out[p < 0.06 ? k.toUpperCase() : k] = mutate(x, r, depth + 1);
    }
    if (r() < 0.04) out.injected = ODD[Math.floor(r() * ODD.length)];
    return out;
  }
  if (typeof v === 'string' && r() < 0.15) {
    const i = Math.floor(r() * (v.length + 1));
    return [v.slice(0, i), `${v.slice(0, i)}A${v.slice(i + 1)}`, v + v, 7][Math.floor(r() * 4)];
  }
  if (typeof v === 'number' && r() < 0.15) return [-v, v * 1e9, v + 0.25, NaN, `${v}`][Math.floor(r() * 5)];
  return v;
}

/** Byte-level damage: flip, cut, splice. */
function damage(bytes: Uint8Array, r: () => number): Uint8Array {
  const b = Uint8Array.from(bytes);
  const kind = r();
  if (kind < 0.4) {
    for (let i = 0; i < 1 + r() * 4; i++) b[Math.floor(r() * b.length)] ^= 1 << Math.floor(r() * 8);
    return b;
  }
  if (kind < 0.7) return b.subarray(0, Math.floor(r() * b.length));
  const junk = Uint8Array.from({ length: Math.floor(r() * 64) }, () => Math.floor(r() * 256));
  const at = Math.floor(r() * b.length);
  return Uint8Array.from([...b.subarray(0, at), ...junk, ...b.subarray(at)]);
}

const request: ServeRequest = { kind: 'completion', prompt: 'In the beginning', temperature: 0, topP: 1, seed: 1, stop: [] };

describe('fuzzed network input', () => {
  it('offers: every mutation that is not the original is rejected with a reason, none throws', async () => {
    const s = await newSigner();
    const now = 1_000_000;
    const good = (await signOffer(s, offerBody(s.peerId, {}, now))).signed;
    const r = rng(21);
    let rejected = 0;
    for (let i = 0; i < 400; i++) {
      const body = i % 2 ? JSON.stringify(mutate(JSON.parse(good.body), r)) : new TextDecoder().decode(damage(new TextEncoder().encode(good.body), r));
      const input = i % 5 === 0 ? mutate(good, r) : { body, sig: i % 7 === 0 ? (mutate(good.sig, r) as string) : good.sig };
      const res = await verifyOffer(input, { network: NETWORK, now, from: s.peerId });
      if (res.ok) {
        // only an unchanged document can pass: the signature covers the text
        expect(JSON.stringify(input)).toBe(JSON.stringify(good));
      } else {
        rejected++;
        expect(res.reason.length).toBeGreaterThan(0);
      }
    }
    expect(rejected).toBeGreaterThan(300);
  });

  it('receipts: mutated receipts never verify and never reach a ledger', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const { signed: ticket } = await signTicket(a, { network: NETWORK, job: newJobId(), server: c.peerId, model: 'm', maxTokens: 10, pricePer1M: 5, issuedAt: 1 });
    const job = JSON.parse(ticket.body).job;
    const { signed: result } = await signResult(c, ticket, { job, promptTokens: 3, completionTokens: 4, finishReason: 'stop', firstTokenMs: 1, totalMs: 2, finishedAt: 3 });
    const { signed: ack } = await signAck(a, job, result, 4);
    const good = { ticket, result, ack };
    expect((await verifyReceipt(good)).ok).toBe(true);
    const ledger = new Ledger(NETWORK);
    const r = rng(7);
    for (let i = 0; i < 300; i++) {
      const part = (['ticket', 'result', 'ack'] as const)[i % 3];
      const doc = good[part];
      const body = i % 2 ? JSON.stringify(mutate(JSON.parse(doc.body), r)) : new TextDecoder().decode(damage(new TextEncoder().encode(doc.body), r));
      const input = i % 11 === 0 ? mutate(good, r) : { ...good, [part]: { body, sig: doc.sig } };
      const v = await verifyReceipt(input);
      if (v.ok) {
        expect(JSON.stringify(input)).toBe(JSON.stringify(good));
        continue;
      }
      expect(v.reason.length).toBeGreaterThan(0);
    }
    expect(ledger.size).toBe(0);
  });

  it('job frames to a server: garbage and mutated jobs end with an error frame, no run, no receipt', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const { signed } = await signTicket(a, { network: NETWORK, job: newJobId(), server: c.peerId, model: 'orchard-demo', maxTokens: 5, pricePer1M: 1, issuedAt: Date.now() });
    const good = { t: 'job', ticket: signed, request };
    const r = rng(99);
    let runs = 0;
    let intact = 0;
    let receipts = 0;
    for (let i = 0; i < 60; i++) {
      const raw = i % 3 === 0 ? damage(encodeFrame(good as never), r) : new TextEncoder().encode(JSON.stringify(mutate(good, r)));
      const [out, inn] = await streamPair();
      const served = serveJob(inn, a.peerId, {
        signer: c,
        network: NETWORK,
        now: Date.now,
        lend: () => ({ ok: true, signal: new AbortController().signal, release: () => {} }),
        run: async () => void runs++,
        claimJob: () => true,
        onReceipt: () => void receipts++,
        onUnpaid: () => {},
        timeouts: { requestMs: 300, ackMs: 100 },
      });
      const parsed = decodeRequesterFrame(raw);
      if (parsed.ok && parsed.frame.t === 'job' && JSON.stringify(parsed.frame.ticket) === JSON.stringify(signed)) intact++;
      const lp = lpStream(out);
      await lp.write(raw).catch(() => undefined);
      if (i % 4 === 0) await out.close().catch(() => undefined);
      const answer = await lp.read().catch(() => null);
      await served; // never rejects, never hangs past its timeouts
      if (answer && answer.byteLength) {
        const d = decodeServerFrame(answer.subarray());
        expect(d.ok).toBe(true);
        // a frame that decodes as a valid job (unchanged ticket) may run; nothing else may
        if (d.ok && d.frame.t !== 'error') expect(parsed.ok && parsed.frame.t === 'job' && JSON.stringify(parsed.frame.ticket) === JSON.stringify(signed)).toBe(true);
      }
    }
    // a run happens exactly for the intact tickets; without a countersignature nothing is charged
    expect(runs).toBe(intact);
    expect(intact).toBeGreaterThan(0);
    expect(intact).toBeLessThan(60);
    expect(receipts).toBe(0);
  });

  it('job frames to a requester: a hostile server\'s garbage fails the job without a receipt', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const r = rng(5);
    const frames = [{ t: 'start', promptTokens: 3 }, { t: 'text', text: 'hello' }, { t: 'result', result: { body: '{}', sig: 'x'.repeat(88) }, decodeTps: 3 }, { t: 'stored' }];
    for (let i = 0; i < 40; i++) {
      const [out, inn] = await streamPair();
      const hostile = (async (s: Stream) => {
        const lp = lpStream(s);
        await lp.read().catch(() => null);
        for (const f of frames) {
          const bytes = new TextEncoder().encode(JSON.stringify(mutate(f, r)));
          await lp.write(i % 2 ? damage(bytes, r) : bytes).catch(() => undefined);
        }
        await s.close().catch(() => undefined);
      })(inn);
      const outcome = await requestJob(out, { signer: a, network: NETWORK, now: Date.now, timeouts: { firstTokenMs: 2000, idleMs: 2000, ackMs: 200 } }, { server: c.peerId, model: 'm', request, maxTokens: 5, pricePer1M: 1, maxPromptTokens: 100 }, () => {}, new AbortController().signal).then(
        (o) => o,
        (err: unknown) => err,
      );
      await hostile;
      if (outcome instanceof Error) expect(outcome).toBeInstanceOf(JobFailure);
      else expect((outcome as { receipt: unknown }).receipt).toBeNull();
    }
  });
});
