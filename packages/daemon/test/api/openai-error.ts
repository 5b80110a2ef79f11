/** OpenAI's error object, exactly: what every error answer of the API must be. */
import { z } from 'zod';

export const openAiError = z
  .object({ error: z.object({ message: z.string().min(1), type: z.string().min(1), param: z.string().nullable(), code: z.string().nullable() }).strict() })
  .strict();
