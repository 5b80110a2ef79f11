/**
 * Server-sent events over fetch (EventSource cannot send an Authorization header). The parser is
 * pure and incremental: feed it text as it arrives, get whole events back.
 */
export interface SseEvent {
  event: string;
  data: string;
}

export class SseParser {
  #buf = '';
  #event = '';
  #data: string[] = [];

  push(text: string): SseEvent[] {
    this.#buf += text;
    const out: SseEvent[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buf);
      if (!m) break;
      const line = this.#buf.slice(0, m.index);
      // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
      if (m[0] === '\r' && m.index === this.#buf.length - 1) break;
      this.#buf = this.#buf.slice(m.index + m[0].length);
      if (line === '') {
        if (this.#data.length) out.push({ event: this.#event || 'message', data: this.#data.join('\n') });
        this.#event = '';
        this.#data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.#event = value;
      else if (field === 'data') this.#data.push(value);
    }
    return out;
  }
}

/** Reads an SSE response body to its end, calling `onEvent` per event. */
export async function readSse(body: ReadableStream<Uint8Array>, onEvent: (e: SseEvent) => void): Promise<void> {
  const parser = new SseParser();
  const reader = body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    for (const e of parser.push(decoder.decode(value, { stream: true }))) onEvent(e);
  }
  for (const e of parser.push(decoder.decode() + '\n\n')) onEvent(e);
}
