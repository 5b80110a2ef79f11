/**
 * Request bodies of the OpenAI-compatible endpoints. Unknown fields are accepted and ignored (clients
 * send many); the ones we use are checked strictly, with bounds, so a bad value is a 400 naming it.
 */
import { z } from 'zod';
import { validateRepoId } from '../store/hub.js';

// Any part type is accepted here; dialects/openai-chat.ts refuses those the model cannot read, by name.
const contentPart = z.object({ type: z.string(), text: z.string().optional() }).passthrough();
const content = z.union([z.string(), z.array(contentPart).max(256)]);

export const chatMessageSchema = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: content.nullable().optional(),
    name: z.string().max(256).optional(),
  })
  .passthrough();

const maxTokens = z.number().int().min(0).max(1_000_000).nullable().optional();

const common = {
  model: z.string().min(1).max(512),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  seed: z.number().int().min(-(2 ** 53)).max(2 ** 53).nullable().optional(),
  stop: z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).max(4)]).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).passthrough().nullable().optional(),
  n: z.literal(1, { error: 'only n = 1 is supported (one choice per request)' }).nullable().optional(),
  /** Orchard's own: speculative decoding for this request (else the daemon's --speculate). */
  speculate: z.enum(['prompt-lookup', 'draft', 'mtp', 'off']).nullable().optional(),
};

export const chatCompletionSchema = z.object({ ...common, messages: z.array(chatMessageSchema).min(1).max(1024) }).passthrough();
export const completionSchema = z.object({ ...common, prompt: z.union([z.string(), z.array(z.string()).length(1)]) }).passthrough();
export type ChatCompletionBody = z.infer<typeof chatCompletionSchema>;
export type CompletionBody = z.infer<typeof completionSchema>;

export const createInstanceSchema = z.object({
  model: z.string().min(1).max(512),
  strategy: z.enum(['auto', 'pipeline', 'tensor']).default('auto'),
  nodes: z.number().int().min(1).max(64).optional(),
  /** Tokens per sequence (prompt + answer); the model's own maximum still caps it. */
  context: z.number().int().min(2).max(1 << 24).optional(),
  /** Wait until the instance serves (default) or return once it is placed. */
  wait: z.boolean().default(true),
});

export const planQuerySchema = z.object({
  model: z.string().min(1).max(512),
  strategy: z.enum(['auto', 'pipeline', 'tensor']).default('auto'),
  nodes: z.coerce.number().int().min(1).max(64).optional(),
  context: z.coerce.number().int().min(2).max(1 << 24).optional(),
});

/** A Hugging Face repo id, ORG/NAME: nothing that could name a path outside the model store ("../../x"). */
const repoId = z
  .string()
  .min(3)
  .max(200)
  .refine(
    (r) => {
      try {
        validateRepoId(r);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'must be a Hugging Face repo id, ORG/NAME (letters, digits, ".", "_", "-"; no "..")' },
  );

export const pullBodySchema = z.object({ repo: repoId, fromPod: z.boolean().optional() });

/** "where: what is wrong" for the first issue. */
export function describeIssue(err: z.ZodError): { message: string; param: string | null } {
  const i = err.issues[0];
  const param = i && i.path.length ? i.path.join('.') : null;
  return { message: param ? `${param}: ${i.message}` : (i?.message ?? 'invalid body'), param };
}

export function textOf(c: z.infer<typeof content> | null | undefined): string {
  if (c == null) return '';
  return typeof c === 'string' ? c : c.map((p) => p.text ?? '').join('');
}
