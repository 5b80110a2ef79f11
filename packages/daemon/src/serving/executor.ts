/**
 * Runs requests on an instance whose driver (rank 0) runs on this node: tokenizes, queues (one
 * request on the data plane at a time, a bounded queue behind it), streams text with stop strings
 * applied, and cancels the runner's loop when the client leaves or a stop string appears.
 */
import { loadTokenizer, penaltiesOf, TextStream, type ConstraintSpec, type ModelConfig, type ModelTokenizer, type TokenLogprob } from '@orchard/engine';
import { InvalidRequestError, type RunnerProcess } from '../runner/runner-process.js';
import type { TokenInfo } from '../requests/fields.js';
import type { ReplyParser } from '../requests/reply.js';
import { DialectError, ServeError } from '../requests/errors.js';
import { checkLogitBias, preparePrompt } from '../prompt/prepare.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';

export interface ExecutorOptions {
  /** Requests on the data plane at once (the driver's sequence slots: one per pipeline stage). @default 1 */
  concurrency?: number;
  /** Requests waiting behind the running one before new ones get 429. */
  maxQueue: number;
  /** Tokens generated when the request gives no max_tokens. */
  defaultMaxTokens: number;
  /** The model's name, in errors. @default the directory */
  model?: string;
}

/** What a request becomes for this model: prompt ids, the output constraint, how to read the reply. */
interface Prepared {
  ids: number[];
  constraint: ConstraintSpec | null;
  keepSpecialTokens: boolean;
  parser: ReplyParser;
}

export class InstanceExecutor {
  readonly runner: RunnerProcess;
  readonly #tokenizer: ModelTokenizer;
  readonly #eos: number[];
  readonly #maxSeqLen: number;
  readonly #vocabSize: number;
  readonly #o: ExecutorOptions;
  readonly #dir: string;
  #active = 0;
  #waiting: (() => void)[] = [];
  /** Decode speed of the last request that produced 2+ tokens (measured on the data plane). */
  #lastDecodeTps: number | null = null;
  /** When a request last started or ended here (ms; for unloading idle instances). */
  #lastActivity = Date.now();

  constructor(runner: RunnerProcess, dir: string, config: ModelConfig, maxSeqLen: number, o: ExecutorOptions) {
    this.runner = runner;
    this.#tokenizer = loadTokenizer(dir);
    this.#dir = dir;
    this.#eos = config.eosTokenIds;
    this.#maxSeqLen = maxSeqLen;
    this.#vocabSize = config.vocabSize;
    this.#o = o;
  }

  get load(): { active: number; queued: number; capacity: number; decodeTokensPerSecond: number | null; idleMs: number } {
    const idleMs = this.#active || this.#waiting.length ? 0 : Date.now() - this.#lastActivity;
    return { active: this.#active, queued: this.#waiting.length, capacity: this.#o.maxQueue, decodeTokensPerSecond: this.#lastDecodeTps, idleMs };
  }

  #prepare(req: ServeRequest): Prepared {
    try {
      checkLogitBias(req, this.#vocabSize);
      const p = preparePrompt(this.#tokenizer, this.#o.model ?? this.#dir, req);
      return { ids: p.ids, constraint: p.constraint, keepSpecialTokens: p.keepSpecialTokens, parser: p.parser() };
    } catch (err) {
      if (err instanceof DialectError) throw new ServeError(err.status, err.code, err.param ? `${err.param}: ${err.message}` : err.message);
      throw err;
    }
  }

  #tokenInfo(lp: TokenLogprob): TokenInfo {
    const text = (id: number) => this.#tokenizer.decode([id], { skipSpecialTokens: false });
    const entry = (id: number, logprob: number) => ({ token: text(id), bytes: [...Buffer.from(text(id), 'utf8')], logprob });
    return { ...entry(lp.id, lp.logprob), top: lp.top.map((t) => entry(t.id, t.logprob)) };
  }

  async #slot(signal: AbortSignal): Promise<void> {
    if (this.#active < (this.#o.concurrency ?? 1) && this.#waiting.length === 0) {
      this.#active++;
      return;
    }
    if (this.#waiting.length >= this.#o.maxQueue) throw new ServeError(429, 'queue_full', `the instance is busy: ${this.#active} running and ${this.#waiting.length} queued (limit ${this.#o.maxQueue}); retry later`);
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        signal.removeEventListener('abort', onAbort);
        this.#active++;
        resolve();
      };
      const onAbort = () => {
        this.#waiting = this.#waiting.filter((w) => w !== go);
        reject(new ServeError(499, 'cancelled', 'client went away'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(go);
    });
  }

  #release(): void {
    this.#lastActivity = Date.now();
    this.#active--;
    this.#waiting.shift()?.();
  }

  async run(req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void> {
    if (this.runner.dead) throw new ServeError(503, 'instance_unavailable', `the instance is down: ${this.runner.dead}`);
    const prep = this.#prepare(req);
    const ids = prep.ids;
    if (ids.length === 0) throw new ServeError(400, 'invalid_prompt', 'the prompt encodes to no tokens');
    if (ids.length >= this.#maxSeqLen) throw new ServeError(400, 'context_length_exceeded', `the prompt has ${ids.length} tokens; this model's context holds ${this.#maxSeqLen}`);
    const room = this.#maxSeqLen - ids.length;
    const maxTokens = Math.min(req.maxTokens ?? this.#o.defaultMaxTokens, room);
    await this.#slot(signal);
    try {
      emit({ type: 'start', promptTokens: ids.length });
      // The reply's parser reads the format's markers, some of which are special tokens.
      const stream = new TextStream((t) => this.#tokenizer.decode(t, { skipSpecialTokens: !prep.keepSpecialTokens }), req.stop);
      let calls = 0;
      const out = (events: ReturnType<ReplyParser['push']>) => {
        for (const e of events) {
          if (e.type === 'content') emit({ type: 'text', text: e.text });
          else if (e.type === 'reasoning') emit({ type: 'reasoning', text: e.text });
          else {
            calls++;
            emit({ type: 'tool_call', index: e.index, call: e.call });
          }
        }
      };
      const eos = new Set(this.#eos);
      let stopped = false;
      const cancel = new AbortController();
      const onAbort = () => cancel.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      let completion = 0;
      try {
        const outcome = await this.runner.generate(
          {
            promptIds: ids,
            maxTokens,
            stopTokenIds: this.#eos,
            temperature: req.temperature,
            topP: req.topP,
            topK: req.topK ?? 0,
            seed: req.seed,
            ...penaltiesOf(req),
            ...(prep.constraint ? { constraint: prep.constraint } : {}),
            ...(req.logprobs !== undefined ? { logprobs: req.logprobs } : {}),
            ...(req.speculate ? { speculate: req.speculate } : {}),
          },
          (id, logprob) => {
            if (stopped) return;
            // Runs inside the runner process's message handler: a listener that throws (its connection
            // just closed) must cancel this request, never escape and take the daemon down.
            try {
              completion++;
              if (logprob && !eos.has(id)) emit({ type: 'logprobs', tokens: [this.#tokenInfo(logprob)] });
              if (eos.has(id)) return;
              const piece = stream.push(id);
              if (piece.text) out(prep.parser.push(piece.text));
              if (piece.stopped) {
                stopped = true;
                cancel.abort();
              }
            } catch {
              stopped = true;
              cancel.abort();
            }
          },
          cancel.signal,
        );
        if (signal.aborted) return;
        if (!stopped) {
          const rest = stream.flush();
          if (rest) out(prep.parser.push(rest));
        }
        out(prep.parser.end());
        const finishReason = stopped || outcome.finishReason === 'stop' ? (calls ? 'tool_calls' : 'stop') : 'length';
        const n = outcome.tokens.length;
        const decodeTokensPerSecond = n > 1 && outcome.decodeMs > 0 ? ((n - 1) * 1000) / outcome.decodeMs : null;
        if (decodeTokensPerSecond !== null) this.#lastDecodeTps = decodeTokensPerSecond;
        emit({ type: 'done', finishReason, promptTokens: ids.length, completionTokens: completion, decodeTokensPerSecond, cachedPromptTokens: outcome.cachedPromptTokens ?? 0 });
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    } catch (err) {
      if (err instanceof ServeError) throw err;
      if (err instanceof InvalidRequestError) throw new ServeError(400, 'invalid_request', err.message);
      throw new ServeError(503, 'instance_failed', `generation failed: ${(err as Error).message}`);
    } finally {
      this.#release();
    }
  }
}
