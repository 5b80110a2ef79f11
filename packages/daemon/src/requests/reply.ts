/**
 * What a model's reply is made of once its chat format is read: text for the user, reasoning, and
 * tool calls. Parsers turn generated text into these; every API dialect writes them its own way.
 */

export interface ParsedCall {
  id: string;
  name: string;
  /** The arguments as JSON text (an object), as OpenAI carries them. */
  arguments: string;
}

export type ReplyEvent =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  /** A whole call: emitted once its arguments are complete and parse as a JSON object. */
  | { type: 'tool_call'; index: number; call: ParsedCall };

/** Reads generated text as it streams. Never throws on odd text: what is not a well-formed call is content. */
export interface ReplyParser {
  push(text: string): ReplyEvent[];
  /** The end of generation: whatever is held back comes out (an unterminated call is parsed if complete, else content). */
  end(): ReplyEvent[];
}

/** Merges neighbouring events of the same text kind (fewer, larger deltas). */
export function coalesce(events: ReplyEvent[]): ReplyEvent[] {
  const out: ReplyEvent[] = [];
  for (const e of events) {
    const last = out[out.length - 1];
    if (e.type !== 'tool_call' && last?.type === e.type) out[out.length - 1] = { type: e.type, text: (last as { text: string }).text + e.text };
    else if (e.type === 'tool_call' || e.text) out.push(e);
  }
  return out;
}
