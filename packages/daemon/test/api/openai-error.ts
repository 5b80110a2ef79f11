/** The error objects of the APIs on the daemon's port, exactly: OpenAI's (Orchard's own routes too), Anthropic's, Ollama's. */
import { z } from 'zod';

export const openAiError = z
  .object({ error: z.object({ message: z.string().min(1), type: z.string().min(1), param: z.string().nullable(), code: z.string().nullable() }).strict() })
  .strict();

export const anthropicErrorShape = z.object({ type: z.literal('error'), error: z.object({ type: z.string().min(1), message: z.string().min(1) }).strict() }).strict();

export const ollamaErrorShape = z.object({ error: z.string().min(1) }).strict();
