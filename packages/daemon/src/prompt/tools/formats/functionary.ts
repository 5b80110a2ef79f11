/**
 * MeetKai Functionary, as its templates write calls:
 *   v3.1 (Llama 3.1)  <function=NAME>{json}</function>, one after another
 *   v3.2              >>>NAME\n{json} per call and >>>all\ntext for text; the generation prompt
 *                     already ends with ">>>", so the reply starts with a recipient
 */
import type { ReplyEvent, ReplyParser } from '../../../requests/reply.js';
import { delimitedParser } from '../delimited.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson, findMarker, jsonValueEnd, partialMarkerTail } from '../scan.js';

export const functionaryV31: ToolCallFormat = {
  name: 'functionary-v3.1',
  detect: (t) => t.includes("'<function=' + ") && t.includes('</function>'),
  parser: (newId) =>
    delimitedParser(
      {
        call: { begin: '<function=', end: '</function>' },
        read(body) {
          const m = /^([^>\s]+)>([\s\S]*)$/.exec(body);
          const args = m ? argumentsJson(m[2].trim()) : null;
          return m && args !== null ? { name: m[1], arguments: args } : null;
        },
      },
      newId,
    ),
  // Its system prompt says "Only call one function at a time": one call, never parallel.
  grammar: (tools) => ({
    type: 'or',
    elements: tools.map((t) => ({ type: 'tag', begin: `<function=${t.function.name}>`, content: { type: 'json_schema', json_schema: parametersOf(t) }, end: '</function>' })),
  }),
  trigger: '<function=',
};

const TO = '>>>';
const ALL = 'all';

/** v3.2: recipient lines. A recipient whose body is not a JSON object is text after all (recipient included). */
function v32Parser(newId: (index: number, name: string) => string): ReplyParser {
  let state: 'recipient' | 'text' | 'args' | 'between' = 'recipient';
  let name = '';
  let buf = '';
  let index = 0;
  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (state === 'recipient') {
        if (buf.startsWith(TO)) buf = buf.slice(TO.length);
        const nl = buf.indexOf('\n');
        if (nl < 0) {
          if (final) events.push({ type: 'content', text: buf });
          else if (!/^[\w.-]*$/.test(buf.replace(/^>{1,2}$/, ''))) {
            state = 'text';
            continue;
          }
          if (final) buf = '';
          return events;
        }
        name = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (name === ALL || !/^[\w.-]+$/.test(name)) {
          if (name !== ALL) buf = `${name}\n${buf}`;
          state = 'text';
        } else state = 'args';
        continue;
      }
      if (state === 'text') {
        const m = findMarker(buf, [TO]);
        if (!m) {
          const hold = final ? 0 : partialMarkerTail(buf, [TO]);
          events.push({ type: 'content', text: buf.slice(0, buf.length - hold) });
          buf = buf.slice(buf.length - hold);
          return events;
        }
        events.push({ type: 'content', text: buf.slice(0, m.at) });
        buf = buf.slice(m.at + TO.length);
        state = 'recipient';
        continue;
      }
      if (state === 'between') {
        // After a call only the next ">>>" belongs (whitespace aside); wait for it rather than call it text.
        const lead = buf.replace(/^\s+/, '');
        if (lead.startsWith(TO)) {
          buf = lead;
          state = 'recipient';
          continue;
        }
        if (!final && TO.startsWith(lead)) return events;
        state = 'text';
        continue;
      }
      const end = jsonValueEnd(buf);
      if (end === -1 && !final) return events;
      const args = end > 0 ? argumentsJson(buf.slice(0, end)) : null;
      if (args === null) {
        buf = `${name}\n${buf}`;
        state = 'text';
        continue;
      }
      events.push({ type: 'tool_call', index, call: { id: newId(index, name), name, arguments: args } });
      index++;
      buf = buf.slice(end);
      state = 'between';
    }
  };
  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

export const functionaryV32: ToolCallFormat = {
  name: 'functionary-v3.2',
  detect: (t) => t.includes(`'${TO}${ALL}`),
  parser: v32Parser,
  grammar: (tools, parallel) => ({
    type: 'tags_with_separator',
    tags: tools.map((t) => ({ type: 'tag', begin: `${t.function.name}\n`, content: { type: 'json_schema', json_schema: parametersOf(t) }, end: '' })),
    separator: TO,
    at_least_one: true,
    stop_after_first: !parallel,
  }),
};
