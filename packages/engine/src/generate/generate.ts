/**
 * The generation loop: feed the prompt (in batches), then sample one token at a time until a stop
 * token, a stop string or the token budget. Works on any LanguageModel (unsplit, pipeline, tensor).
 */
import type { LanguageModel, Session } from '../drivers/in-process.js';
import type { ModelTokenizer } from '../tokenizer/load.js';
import { compileConstraintOrDrop, type ConstraintSpec, type TokenConstraint } from './constraint.js';
import { pickToken } from './pick.js';
import { draftFromContext, type PromptLookupOptions } from './prompt-lookup.js';
import { DraftPolicy, cpuTimeMs } from './draft-policy.js';
import { MtpDrafter } from './mtp-draft.js';
import type { MtpHead } from '../model/mtp.js';
import { pickVerified } from './speculate.js';
import { Sampler, type FullSamplingOptions, type TokenLogprob } from './sampler.js';
import { TextStream } from './text-stream.js';

export interface GenerateOptions extends FullSamplingOptions {
  /** Most tokens to generate. @default 128 */
  maxTokens?: number;
  /** Stop when one of these ids is sampled (it is kept in `tokens`). @default the model's eos ids */
  stopTokenIds?: number[];
  /** Stop when the text contains one of these (it is cut from `text`). Needs a tokenizer. */
  stopStrings?: string[];
  /** Decodes streamed text and applies stop strings; without it only ids are produced. */
  tokenizer?: ModelTokenizer;
  /**
   * What the generated text must match (a JSON schema, a grammar, tool-call tags): tokens that cannot
   * continue it are masked before sampling. Needs a tokenizer (its vocabulary spells the tokens).
   */
  constraint?: ConstraintSpec;
  /** Report each token's log-probability and this many alternatives (0-20). @default none */
  logprobs?: number;
  /** Called with each generated id, as soon as it is sampled (and its logprobs when asked for). */
  onToken?: (id: number, logprob?: TokenLogprob) => void;
  /** Called with each piece of text once it is final (needs a tokenizer); pieces concatenate to `text`. */
  onText?: (text: string) => void;
  signal?: AbortSignal;
  /**
   * Speculative decoding by prompt lookup: draft tokens from the context and verify them in one forward
   * (the model's sessions need forwardAll and rewind). Every token is still picked from the model's own
   * logits in order, so the output is the plain decode's (greedy, and seeded sampling too).
   */
  promptLookup?: PromptLookupOptions | boolean;
  /**
   * Speculative decoding with the checkpoint's multi-token-prediction layer as the drafter (MtpHead.load:
   * DeepSeek-V3's `num_nextn_predict_layers`) in place of prompt lookup; promptLookup's draftTokens and
   * adaptive still apply. Needs sessions with finalHidden (the in-process model); the prefix cache is
   * not used (the drafter needs every prompt row's hidden state). Output: the plain decode's.
   */
  mtp?: MtpHead;
}

export interface GenerateResult {
  /** Generated ids (not the prompt), including a stop token if one ended the run. */
  tokens: number[];
  /** Decoded text (up to a stop string); '' without a tokenizer. */
  text: string;
  /** Per generated token, when `logprobs` was asked for. */
  logprobs?: TokenLogprob[];
  finishReason: 'stop' | 'length' | 'abort';
  promptTokens: number;
  /** Prompt tokens copied from the model's prefix cache instead of computed (the rest were prefilled). */
  cachedPromptTokens: number;
  /** Prompt processing time, ms. */
  prefillMs: number;
  /** Time for the tokens after the first, ms. */
  decodeMs: number;
  /** Decode speed: (tokens - 1) / decode time. NaN with fewer than 2 tokens. */
  tokensPerSecond: number;
  /** With promptLookup or mtp: tokens drafted, and how many of them the model confirmed. */
  speculation?: { drafted: number; accepted: number };
}

export async function generate(model: LanguageModel, promptIds: number[], options: GenerateOptions = {}): Promise<GenerateResult> {
  const maxTokens = options.maxTokens ?? 128;
  if (!Number.isInteger(maxTokens) || maxTokens < 0) throw new RangeError(`maxTokens must be an integer >= 0, got ${maxTokens}`);
  if (promptIds.length === 0) throw new RangeError('generate: the prompt has no tokens');
  if (options.stopStrings?.length && !options.tokenizer) throw new Error('generate: stop strings need a tokenizer');
  if (options.constraint && !options.tokenizer) throw new Error('generate: a constraint needs a tokenizer');
  const top = options.logprobs;
  if (top !== undefined && !(Number.isInteger(top) && top >= 0 && top <= 20)) throw new RangeError(`logprobs must be an integer 0..20, got ${top}`);
  const capacity = Math.min(model.maxSeqLen, promptIds.length + maxTokens);
  if (promptIds.length >= model.maxSeqLen) {
    throw new RangeError(`prompt of ${promptIds.length} tokens does not fit the context of ${model.maxSeqLen}`);
  }
  const stopIds = new Set(options.stopTokenIds ?? model.config.eosTokenIds);
  const sampler = new Sampler(options, promptIds);
  const tok = options.tokenizer;
  const stream = tok ? new TextStream((ids) => tok.decode(ids), options.stopStrings) : null;
  const constraint: TokenConstraint | null = options.constraint
    ? await compileConstraintOrDrop(options.constraint, tok!.vocabulary(), { vocabSize: model.config.vocabSize, stopIds: [...stopIds] })
    : null;
  const session = model.newSession(capacity);
  const lookup = options.promptLookup;
  const lookupOptions = lookup === true ? {} : lookup || (options.mtp ? {} : null);
  // The draft length follows what drafts earn here (DraftPolicy): the acceptance so far and the timed
  // cost of a verify row, which on the CPU is a good part of a decode step and grows with the context.
  const spec = lookupOptions ? { options: lookupOptions, policy: new DraftPolicy(lookupOptions.draftTokens ?? 4), drafted: 0, accepted: 0 } : null;
  // What drafts are looked up in: the prompt and the tokens so far (kept, not rebuilt every step).
  const context = spec ? [...promptIds] : [];

  let drafter: MtpDrafter | null = null;
  const tokens: number[] = [];
  const logprobs: TokenLogprob[] | undefined = top === undefined ? undefined : [];
  let finishReason: GenerateResult['finishReason'] = 'length';
  const t0 = performance.now();
  let t1 = t0;
  let cached = 0;
  try {
    if (spec && !(session.forwardAll && session.rewind)) throw new RangeError('promptLookup needs a model whose sessions verify drafts (forwardAll, rewind): the in-process CPU model; not the GPU one');
    if (options.mtp && !session.finalHidden) throw new RangeError('mtp needs a model whose sessions give their final hidden states (finalHidden): the in-process CPU model');
    drafter = options.mtp ? new MtpDrafter(options.mtp, capacity) : null;
    cached = drafter ? 0 : (session.reusePrefix?.(promptIds) ?? 0);
    // row(j) is the logits to pick the step's j-th token from; drafted the tokens fed after the first on a guess.
    const first = drafter ? await prefillForMtp(session, promptIds, drafter) : await session.forward(promptIds.slice(cached));
    let row = (_j: number) => first;
    let drafted: number[] = [];
    let base = session.length;
    t1 = performance.now();
    // When the step being picked was fed: a step's cost runs from its forward to the end of its picks.
    let fedAt = stepClock();
    const pick = (logits: Float32Array) => pickToken(logits, sampler, constraint, top);
    while (maxTokens > 0) {
      if (options.signal?.aborted) {
        finishReason = 'abort';
        break;
      }
      let ended = false;
      const picks = await pickVerified(row, drafted, pick, ({ id, logprob: lp }) => {
        if (lp) logprobs!.push(lp);
        tokens.push(id);
        if (spec) context.push(id);
        options.onToken?.(id, lp);
        const piece = stopIds.has(id) ? { text: '', stopped: true } : stream ? stream.push(id) : { text: '', stopped: false };
        if (piece.text) options.onText?.(piece.text);
        if (piece.stopped) finishReason = 'stop';
        ended = piece.stopped;
        return !ended && !options.signal?.aborted;
      });
      if (spec) {
        spec.accepted += picks - 1;
        spec.policy.observe(drafted.length, picks - 1);
        if (tokens.length > picks) spec.policy.observeCost(drafted.length + 1, stepClock() - fedAt);
      }
      // The MTP drafter drafts from the model's hidden states of the confirmed rows.
      if (drafter && tokens.length > picks) drafter.confirm(base, session.finalHidden!(drafted.length + 1), picks);
      // The rows after the last picked token were a wrong guess: forget them.
      if (drafted.length >= picks) session.rewind!(base + picks);
      if (ended || tokens.length >= maxTokens || session.length >= capacity) break;
      if (options.signal?.aborted) continue;
      base = session.length;
      const id = tokens[tokens.length - 1];
      const room = Math.min(maxTokens - tokens.length - 1, capacity - base - 1);
      const want = !spec ? 0 : spec.options.adaptive === false ? Math.min(room, spec.policy.max) : spec.policy.next(room);
      // An MTP draft is a forward of its own: timed apart, as the drafter's cost per token (DraftPolicy
      // weighs it against what its tokens earn); prompt lookup's search stays in the step's time.
      fedAt = stepClock();
      if (want > 0 && drafter) {
        drafted = await drafter.draft(context, want);
        const now = stepClock();
        spec!.policy.observeDraftCost(drafted.length, now - fedAt);
        fedAt = now;
      } else drafted = want === 0 ? [] : draftFromContext(context, want, { ...spec!.options, draftTokens: want });
      if (drafted.length === 0) {
        const logits = await session.forward([id]);
        row = () => logits;
      } else {
        spec!.drafted += drafted.length;
        const all = await session.forwardAll!([id, ...drafted]);
        const V = all.length / (drafted.length + 1);
        row = (j) => all.subarray(j * V, (j + 1) * V);
      }
    }
    session.keepPrefix?.();
  } finally {
    drafter?.dispose();
    session.dispose?.();
    constraint?.dispose();
  }
  const t2 = performance.now();
  if (stream) {
    const rest = stream.flush();
    if (rest) options.onText?.(rest);
  }
  const decodeMs = t2 - t1;
  return {
    tokens,
    text: stream ? stream.text : '',
    ...(logprobs ? { logprobs } : {}),
    finishReason,
    promptTokens: promptIds.length,
    cachedPromptTokens: cached,
    prefillMs: t1 - t0,
    decodeMs,
    tokensPerSecond: tokens.length > 1 ? ((tokens.length - 1) * 1000) / decodeMs : NaN,
    ...(spec ? { speculation: { drafted: spec.drafted, accepted: spec.accepted } } : {}),
  };
}

/** The prompt in steps the drafter can take, each step's final hidden rows handed to it; the last logits. */
async function prefillForMtp(session: Session, promptIds: readonly number[], drafter: MtpDrafter): Promise<Float32Array> {
  const B = drafter.head.block.maxBatch;
  let logits: Float32Array | null = null;
  for (let at = 0; at < promptIds.length; at += B) {
    const chunk = promptIds.slice(at, at + B);
    logits = await session.forward(chunk);
    drafter.confirm(at, session.finalHidden!(chunk.length), chunk.length);
  }
  return logits!;
}

/** What a step's cost is measured in: this process's CPU time where there is one (cpuTimeMs says why), else wall time. ms. */
const stepClock: () => number = typeof process !== 'undefined' && typeof process.cpuUsage === 'function' ? cpuTimeMs : () => performance.now();
