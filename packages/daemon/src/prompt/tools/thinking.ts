/**
 * Reasoning between <think> and </think> at the start of a reply (Qwen3, DeepSeek R1 / V3.1; Seed-OSS
 * writes <seed:think>) comes out as reasoning; the rest goes to the reply's own parser. When the
 * prompt itself ends inside the opening marker (the template opened it), the reply starts as reasoning.
 */
import type { ReplyEvent, ReplyParser } from '../../requests/reply.js';
import { partialMarkerTail } from './scan.js';

export interface ThinkingMarkers {
  open: string;
  close: string;
}

export const THINK: ThinkingMarkers = { open: '<think>', close: '</think>' };
const SEED_THINK: ThinkingMarkers = { open: '<seed:think>', close: '</seed:think>' };

/** The reasoning markers a chat template writes, or null for a template without reasoning. */
export function thinkingMarkers(template: string | null): ThinkingMarkers | null {
  if (!template) return null;
  if (template.includes(SEED_THINK.open)) return SEED_THINK;
  return template.includes(THINK.close) ? THINK : null;
}

export function withThinking(inner: ReplyParser, startInside: boolean, markers: ThinkingMarkers = THINK): ReplyParser {
  const { open: OPEN, close: CLOSE } = markers;
  let state: 'start' | 'inside' | 'after' = startInside ? 'inside' : 'start';
  let buf = '';
  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (state === 'after') {
        const text = buf;
        buf = '';
        events.push(...inner.push(text));
        if (final) events.push(...inner.end());
        return events;
      }
      if (state === 'start') {
        const lead = buf.replace(/^\s+/, '');
        if (!final && (!lead || OPEN.startsWith(lead))) return events;
        if (lead.startsWith(OPEN)) {
          buf = lead.slice(OPEN.length);
          state = 'inside';
        } else state = 'after';
        continue;
      }
      const at = buf.indexOf(CLOSE);
      if (at >= 0) {
        events.push({ type: 'reasoning', text: buf.slice(0, at) });
        buf = buf.slice(at + CLOSE.length).replace(/^\s+/, '');
        state = 'after';
        continue;
      }
      const hold = final ? 0 : partialMarkerTail(buf, [CLOSE]);
      events.push({ type: 'reasoning', text: buf.slice(0, buf.length - hold) });
      buf = buf.slice(buf.length - hold);
      if (final) events.push(...inner.end());
      return events;
    }
  };
  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

/** Everything is content: a model without a known format, or tools not in play. */
export function plainParser(): ReplyParser {
  return { push: (text) => (text ? [{ type: 'content', text }] : []), end: () => [] };
}
