/**
 * DeepSeek V3 / R1 and V3.1: calls inside <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>, each
 * <｜tool▁call▁begin｜>BODY<｜tool▁call▁end｜>. V3 and R1 write the body as
 * `function<｜tool▁sep｜>NAME` + a ```json fenced block; V3.1 as `NAME<｜tool▁sep｜>{json}`. Both are
 * read; the grammar writes the form the template itself uses for past calls.
 */
import type { StructuralFormat, TagFormat } from '@orchard/engine';
import { delimitedParser } from '../delimited.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson } from '../scan.js';
import { pythonJson, type ToolDefinition } from '@orchard/engine';

const SECTION = { begin: '<｜tool▁calls▁begin｜>', end: '<｜tool▁calls▁end｜>' };
const CALL = { begin: '<｜tool▁call▁begin｜>', end: '<｜tool▁call▁end｜>' };
const SEP = '<｜tool▁sep｜>';

function read(body: string) {
  const sep = body.indexOf(SEP);
  if (sep < 0) return null;
  const head = body.slice(0, sep).trim();
  let rest = body.slice(sep + SEP.length);
  let name = head;
  if (head === 'function') {
    // V3: NAME on the rest of the line, then the arguments in a ```json fence.
    const nl = rest.indexOf('\n');
    name = (nl < 0 ? rest : rest.slice(0, nl)).trim();
    rest = nl < 0 ? '' : rest.slice(nl + 1);
    const fenced = /^\s*```(?:json)?\s*\n?([\s\S]*?)\n?\s*```\s*$/.exec(rest);
    if (fenced) rest = fenced[1];
  }
  const args = argumentsJson(rest.trim());
  return name && args !== null ? { name, arguments: args } : null;
}

/**
 * The section as a tag around the calls. xgrammar wants a non-empty separator between repeated tags,
 * so each call's own begin marker doubles as the separator (the first one opens with the section).
 */
function grammar(separator: string, tag: (name: string) => { begin: string; end: string }) {
  return (tools: Parameters<ToolCallFormat['grammar']>[0], parallel: boolean): StructuralFormat => ({
    type: 'tag',
    begin: SECTION.begin + CALL.begin,
    content: {
      type: 'tags_with_separator',
      tags: tools.map((t): TagFormat => ({ type: 'tag', ...tag(t.function.name), content: { type: 'json_schema', json_schema: parametersOf(t) } })),
      separator: separator + CALL.begin,
      at_least_one: true,
      stop_after_first: !parallel,
    },
    end: SECTION.end,
  });
}

/**
 * DeepSeek-V3.1's model card tool description: each tool's name, description and parameters
 * (json.dumps), then the call format. V3 / R1 get the same words with their own call form.
 */
function toolPrompt(callForm: string) {
  return (tools: ToolDefinition[]) =>
    '## Tools\nYou have access to the following tools:\n\n' +
    tools.map((t) => `### ${t.function.name}\nDescription: ${t.function.description ?? ''}\n\nParameters: ${pythonJson(t.function.parameters ?? {})}\n\n`).join('') +
    `IMPORTANT: ALWAYS adhere to this exact format for tool use:\n${SECTION.begin}${CALL.begin}${callForm}${CALL.end}{additional_tool_calls}${SECTION.end}\n\n` +
    "Where:\n- `tool_call_name` must be an exact match to one of the available tools\n- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n- For multiple tool calls, chain them directly without separators or spaces";
}

const parser: ToolCallFormat['parser'] = (newId) => delimitedParser({ section: SECTION, call: CALL, read }, newId);

/** V3 / R1: the template writes past calls with a fenced ```json block. */
export const deepseekV3: ToolCallFormat = {
  name: 'deepseek-v3',
  detect: (t) => t.includes(SECTION.begin) && t.includes('```json'),
  parser,
  grammar: grammar('\n', (name) => ({ begin: `function${SEP}${name}\n\`\`\`json\n`, end: `\n\`\`\`${CALL.end}` })),
  trigger: SECTION.begin,
  example: (name, args) => `${SECTION.begin}${CALL.begin}function${SEP}${name}\n\`\`\`json\n${args}\n\`\`\`${CALL.end}${SECTION.end}`,
  toolPrompt: toolPrompt(`function${SEP}tool_call_name\n\`\`\`json\ntool_call_arguments\n\`\`\``),
};

export const deepseekV31: ToolCallFormat = {
  name: 'deepseek-v3.1',
  detect: (t) => t.includes(SECTION.begin),
  parser,
  grammar: grammar('', (name) => ({ begin: `${name}${SEP}`, end: CALL.end })),
  trigger: SECTION.begin,
  example: (name, args) => `${SECTION.begin}${CALL.begin}${name}${SEP}${args}${CALL.end}${SECTION.end}`,
  toolPrompt: toolPrompt(`tool_call_name${SEP}tool_call_arguments`),
};
