/**
 * Mistral: after [TOOL_CALLS], a JSON array of {"name", "arguments"} (Mistral v3 / Nemo), or
 * repeated `[TOOL_CALLS]NAME[ARGS]{json}` (later tokenizers). Text before the marker is content. Its
 * templates take back only call ids of 9 alphanumerics, so ids from clients are mapped to such ids.
 */
import { createHash, randomInt } from 'node:crypto';
import type { ParsedCall, ReplyEvent, ReplyParser } from '../../../requests/reply.js';
import type { ToolCallFormat } from '../format.js';
import { namedArgumentsList } from '../json-list.js';
import { argumentsJson, findMarker, jsonValueEnd, partialMarkerTail, tryJson } from '../scan.js';

const MARK = '[TOOL_CALLS]';
const ARGS = '[ARGS]';
const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

function parser(newId: (index: number, name: string) => string): ReplyParser {
  let calls = false;
  let buf = '';
  let index = 0;
  const emit = (name: unknown, args: unknown, events: ReplyEvent[]): boolean => {
    const a = argumentsJson(args ?? {});
    if (typeof name !== 'string' || !name || a === null) return false;
    const call: ParsedCall = { id: newId(index, name), name, arguments: a };
    events.push({ type: 'tool_call', index: index++, call });
    return true;
  };
  /** Reads whole calls off the front of `buf`; returns false when the text is not calls (then it is content). */
  const drain = (final: boolean, events: ReplyEvent[]): boolean => {
    for (;;) {
      buf = buf.replace(/^\s*(\[TOOL_CALLS\])?\s*/, '');
      if (!buf) return true;
      if (buf[0] === '[' || buf[0] === '{') {
        const end = jsonValueEnd(buf);
        if (end === -1 && !final) return true;
        const v = end > 0 ? tryJson(buf.slice(0, end)) : undefined;
        const list = Array.isArray(v) ? v : v ? [v] : null;
        if (!list || !list.every((c) => c && typeof c === 'object')) return false;
        const good = list.every((c) => emit((c as { name?: unknown }).name, (c as { arguments?: unknown }).arguments, events));
        if (!good) return false;
        buf = buf.slice(end);
        continue;
      }
      // NAME[ARGS]{json}
      const at = buf.indexOf(ARGS);
      // A name so far, perhaps with the start of [ARGS] (it can arrive split across pieces).
      if (at < 0) return !final && /^[\w.-]*$/.test(buf.slice(0, buf.length - partialMarkerTail(buf, [ARGS])));
      const name = buf.slice(0, at).trim();
      const rest = buf.slice(at + ARGS.length);
      const end = jsonValueEnd(rest);
      if (end === -1 && !final) return true;
      if (end < 0 || !emit(name, rest.slice(0, end), events)) return false;
      buf = rest.slice(end);
    }
  };
  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    if (!calls) {
      const m = findMarker(buf, [MARK]);
      if (!m) {
        const hold = final ? 0 : partialMarkerTail(buf, [MARK]);
        events.push({ type: 'content', text: buf.slice(0, buf.length - hold) });
        buf = buf.slice(buf.length - hold);
        return events;
      }
      events.push({ type: 'content', text: buf.slice(0, m.at) });
      buf = buf.slice(m.at + MARK.length);
      calls = true;
    }
    if (!drain(final, events)) {
      // Not calls after all: the rest is plain text (the marker included, so nothing is lost).
      events.push({ type: 'content', text: (index === 0 ? MARK : '') + buf });
      buf = '';
      calls = false;
    }
    return events;
  };
  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

export const mistral: ToolCallFormat = {
  name: 'mistral',
  detect: (t) => t.includes(MARK),
  parser,
  grammar: (tools, parallel) => namedArgumentsList(MARK, tools, parallel),
  trigger: MARK,
  newId: () => Array.from({ length: 9 }, () => ALNUM[randomInt(ALNUM.length)]).join(''),
  historyId(id) {
    if (/^[a-zA-Z0-9]{9}$/.test(id)) return id;
    const h = createHash('sha256').update(id).digest();
    return Array.from(h.subarray(0, 9), (b) => ALNUM[b % ALNUM.length]).join('');
  },
};
