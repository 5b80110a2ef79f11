/** Bytes <-> control messages, with the size limit and sender check applied before anything else. */
import { MAX_CONTROL_BYTES, controlMessageSchema, type ControlMessage } from './messages.js';

export type DecodeResult = { ok: true; message: ControlMessage } | { ok: false; reason: string };

const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

export function encodeControl(message: ControlMessage): Uint8Array {
  const bytes = encoder.encode(JSON.stringify(message));
  if (bytes.length > MAX_CONTROL_BYTES) throw new Error(`control message ${message.type} is ${bytes.length} bytes, over the ${MAX_CONTROL_BYTES} limit`);
  return bytes;
}

/**
 * `sender` is the authenticated peer the bytes came from (gossipsub signs messages); a message that
 * claims another origin is rejected, so one node cannot speak for another.
 */
export function decodeControl(bytes: Uint8Array, sender: string | undefined): DecodeResult {
  if (bytes.length > MAX_CONTROL_BYTES) return { ok: false, reason: `too large (${bytes.length} bytes > ${MAX_CONTROL_BYTES})` };
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(bytes));
  } catch (err) {
    return { ok: false, reason: `not JSON: ${(err as Error).message.slice(0, 120)}` };
  }
  const parsed = controlMessageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `invalid: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'schema mismatch'}` };
  }
  if (sender !== undefined && parsed.data.from !== sender) {
    return { ok: false, reason: `claims to be from ${parsed.data.from}` };
  }
  return { ok: true, message: parsed.data };
}
