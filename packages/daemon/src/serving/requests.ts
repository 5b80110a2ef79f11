/** A generation request as it travels between daemons, and the events that answer it. */
import { z } from 'zod';

export const serveRequestSchema = z.object({
  kind: z.enum(['chat', 'completion']),
  messages: z.array(z.object({ role: z.string().max(64), content: z.string() })).max(1024).optional(),
  prompt: z.string().optional(),
  maxTokens: z.number().int().min(0).optional(),
  temperature: z.number().min(0).max(2),
  topP: z.number().gt(0).max(1),
  seed: z.number().int(),
  stop: z.array(z.string().min(1).max(256)).max(8),
});
export type ServeRequest = z.infer<typeof serveRequestSchema>;

export type FinishReason = 'stop' | 'length';

export type ServeEvent =
  | { type: 'start'; promptTokens: number }
  | { type: 'text'; text: string }
  | { type: 'done'; finishReason: FinishReason; promptTokens: number; completionTokens: number; decodeTokensPerSecond: number | null }
  /** `status`: the HTTP status to answer with when nothing was streamed yet. */
  | { type: 'error'; status: number; code: string; message: string };

/** An error with an HTTP status and an OpenAI error code. */
export class ServeError extends Error {
  override name = 'ServeError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
