/**
 * `/orchard/job/1`: one whole job, requester to one pod, on one libp2p stream. libp2p's noise
 * session runs end to end between the two peers, also through a relay, so the relay sees only
 * ciphertext. Frames in job-frames.ts; receipts in receipts.ts.
 *
 * The server checks the ticket (signed by the peer at the other end of the connection, for this
 * server, this network, a price it accepts, a job id not seen before), asks its lending policy, runs
 * the job on its own pod and streams text; at the end it signs the result and keeps the receipt
 * once the requester countersigned. The requester streams the text to its caller, checks the
 * result against its ticket and countersigns it. Anything wrong ends the job with no receipt, so
 * nothing is charged for it.
 */
import '../polyfills.js';
import type { Stream } from '@libp2p/interface';
import { lpStream, type LengthPrefixedStream } from '@libp2p/utils';
import { ServeError } from '../requests/errors.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { decodeRequesterFrame, decodeServerFrame, encodeFrame, MAX_JOB_FRAME, type RequesterFrame, type ServerFrame } from './job-frames.js';
import { MAX_CLOCK_SKEW_MS } from './offer.js';
import { newJobId, openTicket, signAck, signResult, signTicket, checkResult, verifyReceipt, type Ticket, type VerifiedReceipt } from './receipts.js';
import type { Signer } from './signed.js';

export interface JobTimeouts {
  /** The job frame must arrive this soon after the stream opens. @default 10000 */
  requestMs: number;
  /** The requester's countersignature must arrive this soon after the result. @default 10000 */
  ackMs: number;
  /** Until the first token (a pod may load the model first). @default 120000 */
  firstTokenMs: number;
  /** Silence between frames once tokens flow. @default 60000 */
  idleMs: number;
}

const DEFAULT_TIMEOUTS: JobTimeouts = { requestMs: 10_000, ackMs: 10_000, firstTokenMs: 120_000, idleMs: 60_000 };

/** What the lending side decided about a job, and the signal that preempts it. */
export type LendDecision = { ok: true; signal: AbortSignal; release(): void } | { ok: false; code: string; message: string };

export interface JobServerDeps {
  signer: Signer;
  network: string;
  now(): number;
  /** Lending policy and price; called once the ticket checked out. */
  lend(ticket: Ticket): LendDecision;
  /** Runs the request on this pod (throws ServeError). */
  run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
  /** Records a job id; false when that requester used it before (a replayed ticket). */
  claimJob(requester: string, job: string): boolean;
  onReceipt(r: VerifiedReceipt): void;
  /** The requester did not countersign (refused, bad signature or silence). */
  onUnpaid(peer: string, reason: string): void;
  timeouts?: Partial<JobTimeouts>;
}

const frames = (stream: Stream) => lpStream(stream, { maxDataLength: MAX_JOB_FRAME });

async function readFrame<T>(lp: LengthPrefixedStream, decode: (b: Uint8Array) => { ok: true; frame: T } | { ok: false; reason: string }, ms: number, signal?: AbortSignal): Promise<T> {
  const deadline = AbortSignal.timeout(ms);
  const bytes = await lp.read({ signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
  const d = decode(bytes.subarray());
  if (!d.ok) throw new Error(d.reason);
  return d.frame;
}

/** Handles one inbound job stream; `remotePeer` is the authenticated peer at the other end. */
export async function serveJob(stream: Stream, remotePeer: string, deps: JobServerDeps): Promise<void> {
  const t = { ...DEFAULT_TIMEOUTS, ...deps.timeouts };
  const lp = frames(stream);
  let writes = Promise.resolve();
  let broken: Error | null = null;
  const send = (f: ServerFrame) => {
    writes = writes.then(() => (broken ? undefined : lp.write(encodeFrame(f)))).catch((err: Error) => void (broken ??= err));
    return writes;
  };
  const fail = async (code: string, message: string, retry: boolean) => {
    await send({ t: 'error', code, message, retry });
  };
  try {
    let first: RequesterFrame;
    try {
      first = await readFrame(lp, decodeRequesterFrame, t.requestMs);
    } catch (err) {
      return await fail('bad_request', `no valid job frame: ${(err as Error).message}`, false);
    }
    if (first.t !== 'job') return await fail('bad_request', `expected a job frame, got ${first.t}`, false);
    const opened = await openTicket(first.ticket);
    if (!opened.ok) return await fail('bad_ticket', opened.reason, false);
    const ticket = opened.value;
    const now = deps.now();
    if (ticket.requester !== remotePeer) return await fail('bad_ticket', 'the ticket was issued by another peer', false);
    if (ticket.server !== deps.signer.peerId) return await fail('bad_ticket', 'the ticket is for another server', false);
    if (ticket.network !== deps.network) return await fail('bad_ticket', `the ticket is for network "${ticket.network}"`, false);
    if (Math.abs(now - ticket.issuedAt) > MAX_CLOCK_SKEW_MS) return await fail('bad_ticket', 'the ticket is too old or from the future', false);
    if (!deps.claimJob(ticket.requester, ticket.job)) return await fail('bad_ticket', `job ${ticket.job} was run before`, false);
    const request: ServeRequest = { ...first.request, maxTokens: Math.min(first.request.maxTokens ?? ticket.maxTokens, ticket.maxTokens) };
    const lent = deps.lend(ticket);
    if (!lent.ok) return await fail(lent.code, lent.message, true);

    // The next requester frame is the ack (or refuse); until the result, a close from the requester
    // means it went away, which cancels the job.
    const cancel = new AbortController();
    const next = readFrame(lp, decodeRequesterFrame, 24 * 3600_000, cancel.signal);
    next.catch(() => cancel.abort(new Error('requester went away')));
    const started = deps.now();
    let firstTextAt: number | null = null;
    let done: Extract<ServeEvent, { type: 'done' }> | null = null;
    try {
      await deps.run(
        ticket.model,
        request,
        (e) => {
          if (e.type === 'start') void send({ t: 'start', promptTokens: e.promptTokens });
          else if (e.type === 'done') done = e;
          else if (e.type === 'text' || e.type === 'reasoning' || e.type === 'tool_call' || e.type === 'logprobs') {
            // Any part of the answer counts as its first token: from here on the job cannot move.
            firstTextAt ??= deps.now();
            void send(answerFrame(e));
          }
          if (broken) cancel.abort(broken);
        },
        AbortSignal.any([cancel.signal, lent.signal]),
      );
    } catch (err) {
      const text = firstTextAt !== null;
      if (lent.signal.aborted) return await fail('preempted', 'the lending pod needed its machine back; the job was stopped', !text);
      const e = err instanceof ServeError ? err : new ServeError(503, 'failed', (err as Error).message);
      return await fail(e.code, e.message, !text && e.status !== 400);
    } finally {
      lent.release();
    }
    const d = done as Extract<ServeEvent, { type: 'done' }> | null;
    if (!d) return await fail('failed', 'the pod ended the job without an answer', firstTextAt === null);
    const end = deps.now();
    const { signed: result } = await signResult(deps.signer, first.ticket, {
      job: ticket.job,
      promptTokens: d.promptTokens,
      completionTokens: d.completionTokens,
      finishReason: d.finishReason,
      firstTokenMs: Math.max(0, (firstTextAt ?? end) - started),
      totalMs: Math.max(0, end - started),
      finishedAt: end,
    });
    await send({ t: 'result', result, decodeTps: d.decodeTokensPerSecond });
    let answer: RequesterFrame;
    try {
      answer = await Promise.race([next, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no countersignature in time')), t.ackMs).unref())]);
    } catch (err) {
      return deps.onUnpaid(remotePeer, (err as Error).message);
    }
    if (answer.t !== 'ack') return deps.onUnpaid(remotePeer, answer.t === 'refuse' ? `refused: ${answer.reason}` : `sent ${answer.t} instead of an acknowledgement`);
    const receipt = await verifyReceipt({ ticket: first.ticket, result, ack: answer.ack });
    if (!receipt.ok) return deps.onUnpaid(remotePeer, receipt.reason);
    deps.onReceipt(receipt.receipt);
    await send({ t: 'stored' });
  } finally {
    await writes;
    await stream.close({ signal: AbortSignal.timeout(2000) }).catch(() => stream.abort(new Error('close failed')));
  }
}

type AnswerEvent = Extract<ServeEvent, { type: 'text' | 'reasoning' | 'tool_call' | 'logprobs' }>;
type AnswerFrame = Extract<ServerFrame, { t: 'text' | 'reasoning' | 'tool_call' | 'logprobs' }>;

/** A part of the answer as a frame, and back. */
function answerFrame(e: AnswerEvent): AnswerFrame {
  if (e.type === 'tool_call') return { t: 'tool_call', index: e.index, call: e.call };
  if (e.type === 'logprobs') return { t: 'logprobs', tokens: e.tokens };
  return { t: e.type, text: e.text };
}

function answerEvent(f: AnswerFrame): AnswerEvent {
  if (f.t === 'tool_call') return { type: 'tool_call', index: f.index, call: f.call };
  if (f.t === 'logprobs') return { type: 'logprobs', tokens: f.tokens };
  return { type: f.t, text: f.text };
}

/** Why a job did not complete; `beforeFirstToken` says whether another pod may be asked. */
export class JobFailure extends Error {
  override name = 'JobFailure';
  constructor(
    readonly code: string,
    message: string,
    readonly beforeFirstToken: boolean,
    /** refused: the pod declined (lending policy, busy); failed: it errored; broken: the stream died. */
    readonly kind: 'refused' | 'failed' | 'broken',
  ) {
    super(message);
  }
}

export interface JobRequest {
  server: string;
  model: string;
  request: ServeRequest;
  maxTokens: number;
  pricePer1M: number;
  /** Most prompt tokens the prompt can have become (for checking the server's count). */
  maxPromptTokens: number;
}

export interface JobOutcome {
  receipt: VerifiedReceipt | null;
  /** Why no receipt, when there is none (a result this side would not countersign). */
  unpaid: string | null;
  promptTokens: number;
  completionTokens: number;
  /** Decode speed as this side saw it (first to last token, network included). */
  measuredTps: number | null;
  firstTokenMs: number | null;
}

export interface JobClientDeps {
  signer: Signer;
  network: string;
  now(): number;
  timeouts?: Partial<JobTimeouts>;
}

/** Declines a pod is entitled to (its lending policy), which cost it no reputation. */
const REFUSALS = new Set(['lending_off', 'peer_refused', 'model_not_lent', 'model_too_large', 'too_many_tokens', 'rate_limited', 'busy', 'price', 'preempted']);

/** Runs one job on an open stream to `job.server`; events for the caller arrive through `emit`. */
export async function requestJob(stream: Stream, deps: JobClientDeps, job: JobRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<JobOutcome> {
  const t = { ...DEFAULT_TIMEOUTS, ...deps.timeouts };
  const lp = frames(stream);
  const onAbort = () => stream.abort(new Error('the caller went away'));
  signal.addEventListener('abort', onAbort, { once: true });
  let firstText: number | null = null;
  let lastText: number | null = null;
  const started = deps.now();
  try {
    const { ticket, signed } = await signTicket(deps.signer, {
      network: deps.network,
      job: newJobId(),
      server: job.server,
      model: job.model,
      maxTokens: job.maxTokens,
      pricePer1M: job.pricePer1M,
      issuedAt: deps.now(),
    });
    const request: ServeRequest = { ...job.request, maxTokens: job.maxTokens };
    try {
      await lp.write(encodeFrame({ t: 'job', ticket: signed, request }), { signal });
    } catch (err) {
      throw new JobFailure('broken', `could not send the job: ${(err as Error).message}`, true, 'broken');
    }
    for (;;) {
      let f: ServerFrame;
      try {
        f = await readFrame(lp, decodeServerFrame, firstText === null ? t.firstTokenMs : t.idleMs, signal);
      } catch (err) {
        if (signal.aborted) throw new ServeError(499, 'cancelled', 'client went away');
        throw new JobFailure('broken', `the stream from ${job.server} broke: ${(err as Error).message}`, firstText === null, 'broken');
      }
      if (f.t === 'start') emit({ type: 'start', promptTokens: f.promptTokens });
      else if (f.t === 'text' || f.t === 'reasoning' || f.t === 'tool_call' || f.t === 'logprobs') {
        firstText ??= deps.now();
        lastText = deps.now();
        emit(answerEvent(f));
      } else if (f.t === 'error') {
        const before = firstText === null;
        throw new JobFailure(f.code, f.message, before && f.retry, REFUSALS.has(f.code) ? 'refused' : 'failed');
      } else if (f.t === 'result') {
        const checked = await checkResult(ticket, signed, f.result, { maxPromptTokens: job.maxPromptTokens });
        if (!checked.ok) {
          await lp.write(encodeFrame({ t: 'refuse', reason: checked.reason })).catch(() => undefined);
          throw new JobFailure('bad_result', `${job.server} sent a result this node will not countersign: ${checked.reason}`, firstText === null, 'failed');
        }
        const r = checked.result;
        const measuredTps = r.completionTokens > 1 && firstText !== null && lastText !== null && lastText > firstText ? ((r.completionTokens - 1) * 1000) / (lastText - firstText) : null;
        emit({ type: 'done', finishReason: r.finishReason, promptTokens: r.promptTokens, completionTokens: r.completionTokens, decodeTokensPerSecond: f.decodeTps });
        const { signed: ack } = await signAck(deps.signer, ticket.job, f.result, deps.now());
        const base = { promptTokens: r.promptTokens, completionTokens: r.completionTokens, measuredTps, firstTokenMs: firstText === null ? null : firstText - started };
        try {
          await lp.write(encodeFrame({ t: 'ack', ack }));
        } catch (err) {
          return { ...base, receipt: null, unpaid: `the countersignature could not be sent: ${(err as Error).message}` };
        }
        const receipt = await verifyReceipt({ ticket: signed, result: f.result, ack });
        // 'stored' only confirms; the receipt is complete on this side already.
        await readFrame(lp, decodeServerFrame, t.ackMs).catch(() => undefined);
        return { ...base, receipt: receipt.ok ? receipt.receipt : null, unpaid: receipt.ok ? null : receipt.reason };
      } else if (f.t === 'stored') {
        throw new JobFailure('bad_frame', `${job.server} sent "stored" before a result`, firstText === null, 'failed');
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    await stream.close({ signal: AbortSignal.timeout(2000) }).catch(() => stream.abort(new Error('close failed')));
  }
}
