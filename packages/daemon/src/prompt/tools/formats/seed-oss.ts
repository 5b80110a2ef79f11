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
import type { ToolCallFormat } from '../format.js';
import { readXmlCall } from './qwen3-coder.js';
import { keyValueFormat } from './xml-values.js';

const BEGIN = '<seed:tool_call>';
const END = '</seed:tool_call>';

export const seedOss: ToolCallFormat = keyValueFormat({
  name: 'seed-oss',
  detect: (t) => t.includes(BEGIN) && t.includes('<function=') && t.includes('<parameter='),
  call: { begin: BEGIN, end: END },
  read: readXmlCall,
  write: { begin: (name) => `${BEGIN}\n<function=${name}>\n`, key: (k) => `<parameter=${k}>`, close: '</parameter>\n', end: `</function>\n${END}` },
});
