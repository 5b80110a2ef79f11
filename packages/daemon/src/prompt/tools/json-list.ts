/**
 * The reply parser for formats that write all calls at once as a JSON list after a marker:
 *   Granite 3.x   <|tool_call|>[{"name": ..., "arguments": {...}}]
 *   Command R+    Action: ```json [{"tool_name": ..., "parameters": {...}}] ```
 * Text before the marker is content (streamed at once, but for a tail that could begin the marker).
 * The list is read when it is whole; a list that does not read as calls comes out as plain text,
 * the marker included, so nothing the model wrote is lost.
 */
import type { StructuralFormat, ToolDefinition } from '@orchard/engine';
import type { ReplyEvent, ReplyParser } from '../../requests/reply.js';
import { parametersOf } from './format.js';
import { argumentsJson, findMarker, jsonValueEnd, partialMarkerTail, tryJson } from './scan.js';

export interface JsonListFormat {
  marker: string;
  /** Text that may wrap the list (Command R's ```json fence): skipped before it and after it. */
  fence?: { open: string; close: string };
  /** One element: the call, 'skip' for an element that is no call (Command R's directly-answer), or null when it is not well formed. */
  read(element: Record<string, unknown>): { name: string; arguments: unknown } | 'skip' | null;
}

export function jsonListParser(f: JsonListFormat, newId: (index: number, name: string) => string): ReplyParser {
  let state: 'text' | 'list' = 'text';
  let buf = '';
  let index = 0;

  /** The list at the front of `buf` as calls: the events, 'wait' while it is not whole, or null if it is not calls. */
  const list = (final: boolean): { events: ReplyEvent[]; rest: string } | 'wait' | null => {
    let text = buf.replace(/^\s+/, '');
    if (f.fence) {
      const open = f.fence.open;
      if (!final && open.startsWith(text) && text.length < open.length) return 'wait';
      if (text.startsWith(open)) text = text.slice(open.length);
    }
    const end = jsonValueEnd(text);
    if (end === -1) return final ? null : 'wait';
    if (end < 0) return null;
    const v = tryJson(text.slice(0, end));
    const items = Array.isArray(v) ? v : v && typeof v === 'object' ? [v] : null;
    if (!items?.length) return null;
    const calls: { name: string; arguments: string }[] = [];
    for (const item of items) {
      const c = item && typeof item === 'object' && !Array.isArray(item) ? f.read(item as Record<string, unknown>) : null;
      if (c === 'skip') continue;
      const args = c && c.name ? argumentsJson(c.arguments ?? {}) : null;
      if (!c || args === null) return null;
      calls.push({ name: c.name, arguments: args });
    }
    let rest = text.slice(end);
    if (f.fence) {
      const after = rest.replace(/^\s+/, '');
      if (!final && f.fence.close.startsWith(after) && after.length < f.fence.close.length) return 'wait';
      if (after.startsWith(f.fence.close)) rest = after.slice(f.fence.close.length);
    }
    // Numbered only now: a list read again after a wait must not skip indexes.
    const events: ReplyEvent[] = [];
    for (const c of calls) {
      events.push({ type: 'tool_call', index, call: { id: newId(index, c.name), name: c.name, arguments: c.arguments } });
      index++;
    }
    return { events, rest };
  };

  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (state === 'text') {
        const m = findMarker(buf, [f.marker]);
        if (!m) {
          const hold = final ? 0 : partialMarkerTail(buf, [f.marker]);
          events.push({ type: 'content', text: buf.slice(0, buf.length - hold) });
          buf = buf.slice(buf.length - hold);
          return events;
        }
        events.push({ type: 'content', text: buf.slice(0, m.at) });
        buf = buf.slice(m.at + f.marker.length);
        state = 'list';
        continue;
      }
      const r = list(final);
      if (r === 'wait') return events;
      if (r === null) {
        events.push({ type: 'content', text: f.marker + buf });
        buf = '';
        state = 'text';
        return events;
      }
      events.push(...r.events);
      buf = r.rest;
      state = 'text';
    }
  };

  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

/** The forcing grammar of `begin[{"name": ..., "arguments": {...}}, ...]` (Mistral's [TOOL_CALLS], Granite's <|tool_call|>). */
export function namedArgumentsList(begin: string, tools: ToolDefinition[], parallel: boolean): StructuralFormat {
  return {
    type: 'tag',
    begin: `${begin}[`,
    content: {
      type: 'tags_with_separator',
      tags: tools.map((t) => ({ type: 'tag', begin: `{"name": ${JSON.stringify(t.function.name)}, "arguments": `, content: { type: 'json_schema', json_schema: parametersOf(t) }, end: '}' })),
      separator: ', ',
      at_least_one: true,
      stop_after_first: !parallel,
    },
    end: ']',
  };
}
