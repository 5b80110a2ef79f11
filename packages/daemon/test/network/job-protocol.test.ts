import type { Stream } from '@libp2p/interface';
import { lpStream, streamPair } from '@libp2p/utils';
import { describe, expect, it } from 'vitest';
import { ServeError } from '../../src/requests/errors.js';
import type { ServeEvent, ServeRequest } from '../../src/requests/request.js';
import { JobFailure, requestJob, serveJob, type JobServerDeps, type LendDecision } from '../../src/network/job-protocol.js';
import { decodeServerFrame, encodeFrame, type ServerFrame } from '../../src/network/job-frames.js';
import { newJobId, signTicket, type VerifiedReceipt } from '../../src/network/receipts.js';
import type { Signer } from '../../src/network/signed.js';
import { NETWORK, newSigner } from './fixtures.js';

const request: ServeRequest = { kind: 'chat', messages: [{ role: 'user', content: 'In the beginning' }], temperature: 0, topP: 1, seed: 1, stop: [] };
type Run = JobServerDeps['run'];

/** A pod that streams `pieces` as text, one per tick, then reports the counts. */
const streaming = (pieces: string[], o: { failAfter?: number; promptTokens?: number; completionTokens?: number } = {}): Run => async (_model, _req, emit, signal) => {
  emit({ type: 'start', promptTokens: o.promptTokens ?? 7 });
  for (const [i, p] of pieces.entries()) {
    if (o.failAfter === i) throw new ServeError(503, 'instance_failed', 'runner died');
    await new Promise((r) => setTimeout(r, 2));
    if (signal.aborted) throw new ServeError(499, 'cancelled', 'cancelled');
    emit({ type: 'text', text: p });
  }
  emit({ type: 'done', finishReason: 'length', promptTokens: o.promptTokens ?? 7, completionTokens: o.completionTokens ?? pieces.length, decodeTokensPerSecond: 100 });
};

const lendAlways = (): LendDecision => ({ ok: true, signal: new AbortController().signal, release: () => {} });

async function session(o: { server: Signer; requester: Signer; run: Run; lend?: JobServerDeps['lend']; claimed?: Set<string>; maxTokens?: number; maxPromptTokens?: number; remote?: string; ackMs?: number }) {
  const [out, inn] = await streamPair();
  const receipts: VerifiedReceipt[] = [];
  const unpaid: string[] = [];
  const claimed = o.claimed ?? new Set<string>();
  const served = serveJob(inn, o.remote ?? o.requester.peerId, {
    signer: o.server,
    network: NETWORK,
    now: Date.now,
    lend: o.lend ?? lendAlways,
    run: o.run,
    claimJob: (r, j) => !claimed.has(`${r}/${j}`) && !!claimed.add(`${r}/${j}`),
    onReceipt: (r) => receipts.push(r),
    onUnpaid: (_p, why) => unpaid.push(why),
    timeouts: { ackMs: o.ackMs ?? 5000 },
  });
  const events: ServeEvent[] = [];
  const outcome = requestJob(
    out,
    { signer: o.requester, network: NETWORK, now: Date.now },
    { server: o.server.peerId, model: 'orchard-demo', request, maxTokens: o.maxTokens ?? 16, pricePer1M: 1000, maxPromptTokens: o.maxPromptTokens ?? 1000 },
    (e) => events.push(e),
    new AbortController().signal,
  );
  const result = await outcome.then((v) => ({ ok: true as const, v }), (err: Error) => ({ ok: false as const, err }));
  await served;
  return { result, events, receipts, unpaid };
}

/** The session's error; fails the test when the job succeeded. */
function failureOf(s: Awaited<ReturnType<typeof session>>): Error {
  if (s.result.ok) throw new Error('the job succeeded');
  return s.result.err;
}

describe('/orchard/job/1', () => {
  it('streams the whole answer and leaves the same verified receipt on both sides', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const s = await session({ server: c, requester: a, run: streaming(['And ', 'God ', 'said'], { promptTokens: 9, completionTokens: 3 }) });
    expect(s.result.ok).toBe(true);
    if (!s.result.ok) return;
    expect(s.events.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join('')).toBe('And God said');
    expect(s.events.at(-1)).toMatchObject({ type: 'done', promptTokens: 9, completionTokens: 3 });
    const mine = s.result.v.receipt!;
    expect(mine).not.toBeNull();
    expect(s.receipts).toHaveLength(1);
    expect(s.receipts[0].signed).toEqual(mine.signed);
    expect(mine.charge).toBe(12 * 1000);
    expect(mine.ticket).toMatchObject({ requester: a.peerId, server: c.peerId, maxTokens: 16 });
  });

  it('carries every part of an answer: reasoning, tool calls and logprobs arrive as the pod emitted them', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const parts: ServeEvent[] = [
      { type: 'reasoning', text: 'think' },
      { type: 'logprobs', tokens: [{ token: 'x', bytes: [120], logprob: -0.5, top: [{ token: 'y', bytes: [121], logprob: -1.5 }] }] },
      { type: 'tool_call', index: 0, call: { id: 'call_1', name: 'weather', arguments: '{"city":"Lisbon"}' } },
    ];
    const run: Run = async (_m, _r, emit) => {
      emit({ type: 'start', promptTokens: 3 });
      for (const p of parts) emit(p);
      emit({ type: 'done', finishReason: 'tool_calls', promptTokens: 3, completionTokens: 9, decodeTokensPerSecond: null });
    };
    const s = await session({ server: c, requester: a, run });
    expect(s.events.slice(1, 4)).toEqual(parts);
    expect(s.events.at(-1)).toMatchObject({ type: 'done', finishReason: 'tool_calls', completionTokens: 9 });
    expect(s.receipts[0].result.finishReason).toBe('tool_calls');
  });

  it('a pod that declines (lending policy) fails before the first token, so the caller may try another', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    let ran = false;
    const s = await session({ server: c, requester: a, lend: () => ({ ok: false, code: 'busy', message: 'this pod lends only while idle, and its owner is using it' }), run: async () => void (ran = true) });
    expect(ran).toBe(false);
    expect(s.result.ok).toBe(false);
    const err = failureOf(s);
    expect(err).toBeInstanceOf(JobFailure);
    expect(err).toMatchObject({ code: 'busy', kind: 'refused', beforeFirstToken: true });
    expect(s.receipts).toEqual([]);
  });

  it('a failure before the first token may be retried elsewhere; after it, it may not; neither is charged', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const before = await session({ server: c, requester: a, run: streaming(['x', 'y'], { failAfter: 0 }) });
    expect(failureOf(before)).toMatchObject({ code: 'instance_failed', beforeFirstToken: true, kind: 'failed' });
    const after = await session({ server: c, requester: a, run: streaming(['x', 'y', 'z'], { failAfter: 2 }) });
    expect(failureOf(after)).toMatchObject({ code: 'instance_failed', beforeFirstToken: false });
    expect(after.events.filter((e) => e.type === 'text')).toHaveLength(2);
    expect([...before.receipts, ...after.receipts]).toEqual([]);
  });

  it('a preempted job ends with a clear error and no charge', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const preempt = new AbortController();
    const run: Run = async (model, req, emit, signal) => {
      const p = streaming(['a', 'b', 'c', 'd', 'e', 'f'])(model, req, (e) => {
        emit(e);
        if (e.type === 'text' && e.text === 'b') preempt.abort();
      }, signal);
      return p;
    };
    const s = await session({ server: c, requester: a, run, lend: () => ({ ok: true, signal: preempt.signal, release: () => {} }) });
    expect(failureOf(s)).toMatchObject({ code: 'preempted', beforeFirstToken: false, message: expect.stringContaining('needed its machine back') });
    expect(s.receipts).toEqual([]);
  });

  it('the requester refuses to countersign an inflated count; the server keeps no receipt and says why', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const s = await session({ server: c, requester: a, run: streaming(['x'], { completionTokens: 500 }), maxTokens: 500, maxPromptTokens: 1000 });
    // 500 completion tokens is within the ticket; a prompt count of 7 is within the limit: accepted
    expect(s.receipts).toHaveLength(1);
    const inflated = await session({ server: c, requester: a, run: streaming(['x'], { promptTokens: 5000 }), maxPromptTokens: 100 });
    expect(failureOf(inflated)).toMatchObject({ code: 'bad_result' });
    expect(inflated.receipts).toEqual([]);
    expect(inflated.unpaid).toEqual([expect.stringContaining('refused: result claims 5000 prompt tokens')]);
  });

  it('refuses a replayed ticket and a ticket from another peer than the connection\'s, and asks at most the ticket\'s tokens', async () => {
    const [a, c, x] = await Promise.all([newSigner(), newSigner(), newSigner()]);
    let asked: number | undefined;
    let runs = 0;
    const run: Run = async (m, req, emit, s) => {
      asked = req.maxTokens;
      runs++;
      return streaming(['x'])(m, req, emit, s);
    };
    const claimed = new Set<string>();
    const deps = (remote: string): JobServerDeps => ({
      signer: c,
      network: NETWORK,
      now: Date.now,
      lend: lendAlways,
      run,
      claimJob: (r, j) => !claimed.has(`${r}/${j}`) && !!claimed.add(`${r}/${j}`),
      onReceipt: () => {},
      onUnpaid: () => {},
      timeouts: { ackMs: 200 },
    });
    const { signed } = await signTicket(a, { network: NETWORK, job: newJobId(), server: c.peerId, model: 'orchard-demo', maxTokens: 5, pricePer1M: 1, issuedAt: Date.now() });
    const frame = encodeFrame({ t: 'job', ticket: signed, request: { ...request, maxTokens: 4000 } });
    const first = await rawExchange(frame, (st) => serveJob(st, a.peerId, deps(a.peerId)));
    expect(first.map((f) => f.t)).toEqual(['start', 'text', 'result']);
    expect(asked).toBe(5);
    const replay = await rawExchange(frame, (st) => serveJob(st, a.peerId, deps(a.peerId)));
    expect(replay).toEqual([{ t: 'error', code: 'bad_ticket', message: expect.stringContaining('was run before'), retry: false }]);
    const spoofed = await rawExchange(frame, (st) => serveJob(st, x.peerId, deps(x.peerId)));
    expect(spoofed).toEqual([{ t: 'error', code: 'bad_ticket', message: 'the ticket was issued by another peer', retry: false }]);
    expect(runs).toBe(1);
  });
});

/** Writes one raw frame to a server and collects the frames it answers until it closes. */
async function rawExchange(frame: Uint8Array, serve: (s: Stream) => Promise<void>): Promise<ServerFrame[]> {
  const [out, inn] = await streamPair();
  const served = serve(inn);
  const lp = lpStream(out);
  await lp.write(frame);
  const got: ServerFrame[] = [];
  for (;;) {
    const bytes = await lp.read().catch(() => null);
    if (!bytes || bytes.byteLength === 0) break;
    const d = decodeServerFrame(bytes.subarray());
    if (!d.ok) throw new Error(d.reason);
    got.push(d.frame);
  }
  await served;
  return got;
}
