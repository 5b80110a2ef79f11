/**
 * gpt-oss (harmony): a reply is a run of messages, each `<|channel|>CHANNEL[ to=RECIPIENT][
 * <|constrain|>json]<|message|>BODY` ending at <|end|> (then `<|start|>assistant` and the next) or at
 * the stop tokens <|call|> / <|return|>. `analysis` is reasoning, `final` (and commentary to nobody)
 * is content, commentary `to=functions.NAME` is a call whose body is the JSON arguments.
 */
import type { ReplyEvent, ReplyParser } from '../../../requests/reply.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson, findMarker, partialMarkerTail } from '../scan.js';

const MESSAGE = '<|message|>';
const ENDS = ['<|end|>', '<|call|>', '<|return|>'];
const START = '<|start|>';
/** How a reply's first header can begin (after the prompt's `<|start|>assistant`, or repeating it). */
const OPENINGS = ['<|', 'to=', 'assistant'];

function parser(newId: (index: number, name: string) => string): ReplyParser {
  let state: 'header' | 'body' | 'text' = 'header';
  let buf = '';
  let kind: 'reasoning' | 'content' | 'call' = 'content';
  let recipient = '';
  let index = 0;

  const header = (h: string) => {
    const channel = /<\|channel\|>\s*(\w+)/.exec(h)?.[1] ?? 'final';
    recipient = /\bto=([^\s<]+)/.exec(h)?.[1] ?? '';
    kind = recipient.startsWith('functions.') ? 'call' : channel === 'analysis' ? 'reasoning' : 'content';
  };
  const finishCall = (body: string, events: ReplyEvent[]) => {
    const name = recipient.slice('functions.'.length);
    const args = argumentsJson(body.trim());
    if (name && args !== null) events.push({ type: 'tool_call', index, call: { id: newId(index, name), name, arguments: args } }), index++;
    else events.push({ type: 'content', text: body });
  };

  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (state === 'text') {
        events.push({ type: 'content', text: buf });
        buf = '';
        return events;
      }
      if (state === 'header') {
        const lead = buf.replace(/^\s+/, '');
        // A reply that does not open with a harmony header is plain text.
        if (lead && !OPENINGS.some((o) => lead.startsWith(o) || o.startsWith(lead))) {
          state = 'text';
          continue;
        }
        const at = buf.indexOf(MESSAGE);
        if (at < 0) {
          if (final) state = 'text';
          else return events;
          continue;
        }
        header(buf.slice(0, at));
        buf = buf.slice(at + MESSAGE.length);
        state = 'body';
        continue;
      }
      const m = findMarker(buf, [...ENDS, START]);
      if (kind === 'call') {
        if (!m && !final) return events;
        finishCall(m ? buf.slice(0, m.at) : buf, events);
      } else {
        const upto = m ? m.at : final ? buf.length : buf.length - partialMarkerTail(buf, [...ENDS, START]);
        events.push({ type: kind, text: buf.slice(0, upto) });
        if (!m) {
          buf = buf.slice(upto);
          if (final) buf = '';
          return events;
        }
      }
      if (!m) {
        buf = '';
        return events;
      }
      buf = buf.slice(m.at + m.marker.length).replace(/^<\|start\|>/, '');
      state = 'header';
    }
  };
  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

export const harmony: ToolCallFormat = {
  name: 'harmony',
  detect: (t) => t.includes('<|channel|>'),
  parser,
  // One call per turn: <|call|> (a stop token) ends it.
  grammar: (tools) => ({
    type: 'or',
    elements: tools.map((t) => ({
      type: 'tag',
      begin: `<|channel|>commentary to=functions.${t.function.name} <|constrain|>json${MESSAGE}`,
      content: { type: 'json_schema', json_schema: parametersOf(t) },
      end: '',
    })),
  }),
};
