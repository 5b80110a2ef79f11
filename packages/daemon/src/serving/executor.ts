/**
 * Runs requests on an instance whose driver (rank 0) runs on this node: tokenizes, queues (one
 * request on the data plane at a time, a bounded queue behind it), streams text with stop strings
 * applied, and cancels the runner's loop when the client leaves or a stop string appears.
 */
import { loadTokenizer, TextStream, type ModelConfig, type ModelTokenizer } from '@orchard/engine';
import type { RunnerProcess } from '../runner/runner-process.js';
import { ServeError, type ServeEvent, type ServeRequest } from './requests.js';

export interface ExecutorOptions {
  /** Requests on the data plane at once (the driver's sequence slots: one per pipeline stage). @default 1 */
  concurrency?: number;
  /** Requests waiting behind the running one before new ones get 429. */
  maxQueue: number;
  /** Tokens generated when the request gives no max_tokens. */
  defaultMaxTokens: number;
}

export class InstanceExecutor {
  readonly runner: RunnerProcess;
  readonly #tokenizer: ModelTokenizer;
  readonly #eos: number[];
  readonly #maxSeqLen: number;
  readonly #o: ExecutorOptions;
  #active = 0;
  #waiting: (() => void)[] = [];
  /** Decode speed of the last request that produced 2+ tokens (measured on the data plane). */
  #lastDecodeTps: number | null = null;

  constructor(runner: RunnerProcess, dir: string, config: ModelConfig, maxSeqLen: number, o: ExecutorOptions) {
    this.runner = runner;
    this.#tokenizer = loadTokenizer(dir);
    this.#eos = config.eosTokenIds;
    this.#maxSeqLen = maxSeqLen;
    this.#o = o;
  }

  get load(): { active: number; queued: number; capacity: number; decodeTokensPerSecond: number | null } {
    return { active: this.#active, queued: this.#waiting.length, capacity: this.#o.maxQueue, decodeTokensPerSecond: this.#lastDecodeTps };
  }

  #encode(req: ServeRequest): number[] {
    const tok = this.#tokenizer;
    if (req.kind === 'chat') {
      const messages = req.messages ?? [];
      if (tok.chatTemplate) return tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false });
      // A text-continuation model has no template: the conversation as plain text, ready for the reply.
      const text = messages.map((m) => (m.role === 'system' ? `${m.content}\n\n` : `${m.role === 'assistant' ? 'Assistant' : 'User'}: ${m.content}\n`)).join('') + 'Assistant:';
      return tok.encode(text);
    }
    return tok.encode(req.prompt ?? '');
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
    this.#active--;
    this.#waiting.shift()?.();
  }

  async run(req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void> {
    if (this.runner.dead) throw new ServeError(503, 'instance_unavailable', `the instance is down: ${this.runner.dead}`);
    const ids = this.#encode(req);
    if (ids.length === 0) throw new ServeError(400, 'invalid_prompt', 'the prompt encodes to no tokens');
    if (ids.length >= this.#maxSeqLen) throw new ServeError(400, 'context_length_exceeded', `the prompt has ${ids.length} tokens; this model's context holds ${this.#maxSeqLen}`);
    const room = this.#maxSeqLen - ids.length;
    const maxTokens = Math.min(req.maxTokens ?? this.#o.defaultMaxTokens, room);
    await this.#slot(signal);
    try {
      emit({ type: 'start', promptTokens: ids.length });
      const stream = new TextStream((t) => this.#tokenizer.decode(t), req.stop);
      const eos = new Set(this.#eos);
      let stopped = false;
      const cancel = new AbortController();
      const onAbort = () => cancel.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      let completion = 0;
      try {
        const outcome = await this.runner.generate(
          { promptIds: ids, maxTokens, stopTokenIds: this.#eos, temperature: req.temperature, topP: req.topP, topK: 0, seed: req.seed },
          (id) => {
            if (stopped) return;
            completion++;
            if (eos.has(id)) return;
            const piece = stream.push(id);
            if (piece.text) emit({ type: 'text', text: piece.text });
            if (piece.stopped) {
              stopped = true;
              cancel.abort();
            }
          },
          cancel.signal,
        );
        if (signal.aborted) return;
        if (!stopped) {
          const rest = stream.flush();
          if (rest) emit({ type: 'text', text: rest });
        }
        const finishReason = stopped || outcome.finishReason === 'stop' ? 'stop' : 'length';
        const n = outcome.tokens.length;
        const decodeTokensPerSecond = n > 1 && outcome.decodeMs > 0 ? ((n - 1) * 1000) / outcome.decodeMs : null;
        if (decodeTokensPerSecond !== null) this.#lastDecodeTps = decodeTokensPerSecond;
        emit({ type: 'done', finishReason, promptTokens: ids.length, completionTokens: completion, decodeTokensPerSecond });
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    } catch (err) {
      if (err instanceof ServeError) throw err;
      throw new ServeError(503, 'instance_failed', `generation failed: ${(err as Error).message}`);
    } finally {
      this.#release();
    }
  }
}
