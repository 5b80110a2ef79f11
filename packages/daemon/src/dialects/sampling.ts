/**
 * Each dialect's sampling names onto Orchard's (those llama-server and Ollama offer): penalties with
 * their window, min-p, typical-p, logit bias, and whether the model reasons before it answers. What
 * cannot be honoured is a 400 naming the field; what only tunes how a model is loaded (Ollama's
 * num_gpu, use_mmap, ...) is accepted and left to the instance, as Ollama leaves it to a loaded model.
 */
import { z } from 'zod';
import type { ServeRequest } from '../requests/request.js';
import { DialectError } from '../requests/errors.js';
import type { samplingFields } from '../requests/fields.js';

type Sampling = Partial<Pick<ServeRequest, keyof typeof samplingFields | 'topK'>>;

/** The first issue of a zod parse as a 400 naming `prefix.field`. */
function parsed<T>(schema: z.ZodType<T>, value: unknown, prefix: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  const path = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
  throw new DialectError(`${path}: ${i.message}`, path);
}

const num = (lo: number, hi: number) => z.number().min(lo).max(hi).nullable().optional();
/** -1: the whole context (llama.cpp and Ollama). */
const lastN = z.number().int().min(-1).max(2 ** 31 - 1).nullable().optional();
const windowOf = (n: number | null | undefined) => (n == null ? {} : { repeatLastN: n === -1 ? 2 ** 31 - 1 : n });

const logitBias = z.record(z.string().regex(/^\d{1,9}$/, 'keys are token ids'), z.number().min(-100).max(100)).nullable().optional();

const openAi = z
  .object({
    frequency_penalty: num(-2, 2),
    presence_penalty: num(-2, 2),
    logit_bias: logitBias,
    // llama-server's and vLLM's extensions, which OpenAI-compatible clients pass through.
    top_k: z.number().int().min(0).nullable().optional(),
    min_p: num(0, 1),
    typical_p: z.number().gt(0).max(1).nullable().optional(),
    repeat_penalty: z.number().gt(0).max(100).nullable().optional(),
    repeat_last_n: lastN,
    reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(),
    chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).passthrough().nullable().optional(),
  })
  .passthrough();

function defined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null)) as Partial<T>;
}

/** OpenAI chat / completions (and llama-server's extra names). */
export function openAiSampling(body: Record<string, unknown>): Sampling {
  const b = parsed(openAi, body, '');
  const effort = b.reasoning_effort == null ? undefined : b.reasoning_effort === 'minimal' ? 'low' : b.reasoning_effort;
  const thinking = b.chat_template_kwargs?.enable_thinking;
  return defined({
    topK: b.top_k ?? undefined,
    minP: b.min_p,
    typicalP: b.typical_p,
    repeatPenalty: b.repeat_penalty,
    frequencyPenalty: b.frequency_penalty,
    presencePenalty: b.presence_penalty,
    logitBias: b.logit_bias ?? undefined,
    reasoning: thinking === false ? false : (effort ?? thinking),
    ...windowOf(b.repeat_last_n),
  }) as Sampling;
}

/**
 * Ollama's options. Honoured: the sampling ones. Accepted and left to the instance: those that say
 * how to load or run a model (Orchard places and sizes instances itself; num_ctx beyond the instance's
 * context is the usual context_length_exceeded). Refused by name: mirostat (1, 2) and tfs_z (not 1) —
 * other samplers than these. penalize_newline is accepted: Ollama itself ignores it since 0.5.
 */
const ollamaOptions = z
  .object({
    min_p: num(0, 1),
    typical_p: z.number().gt(0).max(1).nullable().optional(),
    repeat_penalty: z.number().gt(0).max(100).nullable().optional(),
    repeat_last_n: lastN,
    presence_penalty: num(-100, 100),
    frequency_penalty: num(-100, 100),
    mirostat: z.number().int().min(0).max(2).nullable().optional(),
    mirostat_eta: z.number().nullable().optional(),
    mirostat_tau: z.number().nullable().optional(),
    tfs_z: z.number().nullable().optional(),
    penalize_newline: z.boolean().nullable().optional(),
    num_ctx: z.number().int().nullable().optional(),
    num_keep: z.number().int().nullable().optional(),
    num_batch: z.number().int().nullable().optional(),
    num_gpu: z.number().int().nullable().optional(),
    main_gpu: z.number().int().nullable().optional(),
    num_thread: z.number().int().nullable().optional(),
    use_mmap: z.boolean().nullable().optional(),
    use_mlock: z.boolean().nullable().optional(),
    low_vram: z.boolean().nullable().optional(),
    f16_kv: z.boolean().nullable().optional(),
    vocab_only: z.boolean().nullable().optional(),
    numa: z.boolean().nullable().optional(),
  })
  .passthrough();

export function ollamaSampling(options: Record<string, unknown> | undefined, think: boolean | string | undefined): Sampling {
  const o = parsed(ollamaOptions, options ?? {}, 'options');
  if (o.mirostat) throw new DialectError(`options.mirostat: mirostat ${o.mirostat} sampling is not implemented (0, the default, is; so are top_k, top_p, min_p, typical_p and the penalties)`, 'options.mirostat');
  if (o.tfs_z != null && o.tfs_z !== 1) throw new DialectError(`options.tfs_z: tail-free sampling is not implemented (1, off, is accepted)`, 'options.tfs_z');
  return defined({
    minP: o.min_p,
    typicalP: o.typical_p,
    repeatPenalty: o.repeat_penalty,
    frequencyPenalty: o.frequency_penalty,
    presencePenalty: o.presence_penalty,
    reasoning: thinkOf(think, 'think'),
    ...windowOf(o.repeat_last_n),
  }) as Sampling;
}

/** Ollama's `think`: a boolean, or an effort for gpt-oss ("low", "medium", "high"). */
function thinkOf(think: boolean | string | undefined, field: string): ServeRequest['reasoning'] {
  if (think === undefined || typeof think === 'boolean') return think;
  if (think === 'low' || think === 'medium' || think === 'high') return think;
  throw new DialectError(`${field}: must be true, false, "low", "medium" or "high", got ${JSON.stringify(think)}`, field);
}

/** Anthropic's `thinking`: {type: 'enabled', budget_tokens} or {type: 'disabled'}. */
export function anthropicReasoning(thinking: unknown): Sampling {
  if (thinking == null) return {};
  const t = parsed(z.object({ type: z.enum(['enabled', 'disabled', 'adaptive']), budget_tokens: z.number().int().min(0).optional() }).passthrough(), thinking, 'thinking');
  return { reasoning: t.type !== 'disabled' };
}

/** The Responses API's `reasoning: {effort}`. */
export function responsesReasoning(reasoning: unknown): Sampling {
  if (reasoning == null) return {};
  const r = parsed(z.object({ effort: z.enum(['none', 'minimal', 'low', 'medium', 'high']).nullable().optional() }).passthrough(), reasoning, 'reasoning');
  if (r.effort == null) return {};
  return { reasoning: r.effort === 'none' ? false : r.effort === 'minimal' ? 'low' : r.effort };
}
