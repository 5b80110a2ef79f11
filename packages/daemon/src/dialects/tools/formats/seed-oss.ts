/**
 * ByteDance Seed-OSS: each call between <seed:tool_call> and </seed:tool_call>, XML inside as
 * Qwen3-Coder writes it but with values flush against their tags:
 *   <seed:tool_call>
 *   <function=NAME>
 *   <parameter=KEY>value (text, or JSON for non-strings)</parameter>
 *   </function>
 *   </seed:tool_call>
 * Reasoning comes in <seed:think> ... </seed:think> (see thinking.ts).
 */
import { delimitedParser } from '../delimited.js';
import type { ToolCallFormat } from '../format.js';
import { readXmlCall } from './qwen3-coder.js';
import { argumentsOf, parameterGrammar } from './xml-values.js';

const BEGIN = '<seed:tool_call>';
const END = '</seed:tool_call>';

export const seedOss: ToolCallFormat = {
  name: 'seed-oss',
  detect: (t) => t.includes(BEGIN) && t.includes('<function=') && t.includes('<parameter='),
  parser: (newId, tools) =>
    delimitedParser(
      {
        call: { begin: BEGIN, end: END },
        read(body) {
          const c = readXmlCall(body);
          return c && { name: c.name, arguments: argumentsOf(c.pairs, tools, c.name) };
        },
      },
      newId,
    ),
  grammar: (tools, parallel) => ({
    type: 'tags_with_separator',
    tags: tools.map((t) => ({
      type: 'tag',
      begin: `${BEGIN}\n<function=${t.function.name}>\n`,
      content: parameterGrammar(t, (k) => `<parameter=${k}>`, '</parameter>\n'),
      end: `</function>\n${END}`,
    })),
    separator: '\n',
    at_least_one: true,
    stop_after_first: !parallel,
  }),
};
