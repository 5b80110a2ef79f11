/**
 * Frames of `/orchard/job/1`, one JSON document per length-prefixed frame. Every frame received is
 * untrusted: size-checked, parsed and validated here, and a bad one ends the job without a charge.
 *
 *   requester -> server: job {ticket, request}            then, after the result: ack | refuse
 *   server -> requester: start, text / reasoning / tool_call / logprobs..., result {signed}
 *                        or error (before or instead of the result),
 *                        then stored once the countersigned receipt is kept
 */
import { z } from 'zod';
import { serveRequestSchema } from '../requests/request.js';
import { issueText, signedSchema } from './signed.js';

export const JOB_PROTOCOL = '/orchard/job/1';
/** A frame larger than this ends the job (a prompt of a few hundred KiB fits). */
export const MAX_JOB_FRAME = 1024 * 1024;

export const requesterFrameSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('job'), ticket: signedSchema, request: serveRequestSchema }).strict(),
  z.object({ t: z.literal('ack'), ack: signedSchema }).strict(),
  z.object({ t: z.literal('refuse'), reason: z.string().max(1000) }).strict(),
]);
export type RequesterFrame = z.infer<typeof requesterFrameSchema>;

const tokenAlternative = z.object({ token: z.string().max(1024), bytes: z.array(z.number().int().min(0).max(255)).max(1024), logprob: z.number().max(0) }).strict();

export const serverFrameSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('start'), promptTokens: z.number().int().nonnegative().max(1e9) }).strict(),
  z.object({ t: z.literal('text'), text: z.string().max(64 * 1024) }).strict(),
  z.object({ t: z.literal('reasoning'), text: z.string().max(64 * 1024) }).strict(),
  z.object({ t: z.literal('tool_call'), index: z.number().int().min(0).max(1024), call: z.object({ id: z.string().max(128), name: z.string().min(1).max(128), arguments: z.string().max(256 * 1024) }).strict() }).strict(),
  z.object({ t: z.literal('logprobs'), tokens: z.array(tokenAlternative.extend({ top: z.array(tokenAlternative).max(20) })).max(4096) }).strict(),
  z.object({ t: z.literal('result'), result: signedSchema, decodeTps: z.number().finite().positive().max(1e7).nullable() }).strict(),
  /** `retry`: nothing was generated, so the requester may ask another pod. */
  z.object({ t: z.literal('error'), code: z.string().max(64), message: z.string().max(2000), retry: z.boolean() }).strict(),
  z.object({ t: z.literal('stored') }).strict(),
]);
export type ServerFrame = z.infer<typeof serverFrameSchema>;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function encodeFrame(frame: RequesterFrame | ServerFrame): Uint8Array {
  const bytes = encoder.encode(JSON.stringify(frame));
  if (bytes.length > MAX_JOB_FRAME) throw new Error(`job frame ${frame.t} is ${bytes.length} bytes, over the ${MAX_JOB_FRAME} limit`);
  return bytes;
}

export type Decoded<T> = { ok: true; frame: T } | { ok: false; reason: string };

function decodeWith<T>(schema: z.ZodType<T>, bytes: Uint8Array): Decoded<T> {
  if (bytes.length > MAX_JOB_FRAME) return { ok: false, reason: `frame of ${bytes.length} bytes, over the ${MAX_JOB_FRAME} limit` };
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(bytes));
  } catch {
    return { ok: false, reason: 'frame is not UTF-8 JSON' };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `bad frame: ${issueText(parsed.error)}` };
  return { ok: true, frame: parsed.data };
}

export const decodeRequesterFrame = (bytes: Uint8Array) => decodeWith(requesterFrameSchema, bytes);
export const decodeServerFrame = (bytes: Uint8Array) => decodeWith(serverFrameSchema, bytes);
