/**
 * The reply parser for formats that wrap each call in markers, optionally inside a section:
 *   Hermes/Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *   DeepSeek      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *   Kimi K2       <|tool_calls_section_begin|><|tool_call_begin|>...<|tool_call_end|>...<|tool_calls_section_end|>
 * Text outside calls streams as content at once, except a tail that could be the start of a marker.
 * A call's body is read when its end marker arrives (or at the end of generation, for a model that
 * stops right after the arguments); a body that does not read as a call comes out as plain text.
 */
import type { ParsedCall, ReplyEvent, ReplyParser } from '../../requests/reply.js';
import { findMarker, jsonValueEnd, partialMarkerTail } from './scan.js';

export interface CallBody {
  name: string;
  /** JSON text of an object. */
  arguments: string;
  /** The model's own id for the call (Kimi writes one). */
  id?: string;
}

export interface DelimitedFormat {
  section?: { begin: string; end: string };
  call: { begin: string; end: string };
  /** One call's body (between the call markers); null if it is not a well-formed call. */
  read(body: string): CallBody | null;
}

type State = 'text' | 'section' | 'call';

export function delimitedParser(f: DelimitedFormat, newId: (index: number, name: string) => string): ReplyParser {
  let state: State = 'text';
  let buf = '';
  let index = 0;
  const opening = f.section ? [f.section.begin, f.call.begin] : [f.call.begin];

  const call = (body: string, terminated: boolean, events: ReplyEvent[]) => {
    const c = f.read(body);
    if (!c) {
      events.push({ type: 'content', text: f.call.begin + body + (terminated ? f.call.end : '') });
      return;
    }
    const parsed: ParsedCall = { id: c.id ?? newId(index, c.name), name: c.name, arguments: c.arguments };
    events.push({ type: 'tool_call', index: index++, call: parsed });
  };

  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (state === 'text') {
        const m = findMarker(buf, opening);
        if (m) {
          events.push({ type: 'content', text: buf.slice(0, m.at) });
          buf = buf.slice(m.at + m.marker.length);
          state = f.section && m.marker === f.section.begin ? 'section' : 'call';
          continue;
        }
        const hold = final ? 0 : partialMarkerTail(buf, opening);
        events.push({ type: 'content', text: buf.slice(0, buf.length - hold) });
        buf = buf.slice(buf.length - hold);
        return events;
      }
      if (state === 'section') {
        const s = f.section!;
        const m = findMarker(buf, [f.call.begin, s.end]);
        if (!m) {
          if (final) {
            events.push({ type: 'content', text: buf.trim() ? buf : '' });
            buf = '';
          }
          return events;
        }
        // Nothing but separators belongs between calls; anything else is kept as text.
        if (buf.slice(0, m.at).trim()) events.push({ type: 'content', text: buf.slice(0, m.at) });
        buf = buf.slice(m.at + m.marker.length);
        state = m.marker === s.end ? 'text' : 'call';
        continue;
      }
      // In a call: up to its end marker (or the next call's begin, when a model forgets the end). A
      // marker inside a JSON body's unfinished string ("</tool_call>" as an argument's text) is text.
      const ends = [f.call.end, f.call.begin, ...(f.section ? [f.section.end] : [])];
      let m = findMarker(buf, ends);
      while (m && jsonValueEnd(buf.slice(0, m.at)) === -1) m = findMarker(buf, ends, m.at + m.marker.length);
      if (!m) {
        if (final) {
          call(buf, false, events);
          buf = '';
          state = 'text';
        }
        return events;
      }
      call(buf.slice(0, m.at), m.marker === f.call.end, events);
      buf = buf.slice(m.at + (m.marker === f.call.end ? m.marker.length : 0));
      state = f.section ? 'section' : 'text';
    }
  };

  return {
    push(text) {
      buf += text;
      return run(false).filter((e) => e.type === 'tool_call' || e.text);
    },
    end() {
      return run(true).filter((e) => e.type === 'tool_call' || e.text);
    },
  };
}
