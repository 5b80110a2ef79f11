/**
 * `orchard template [MESSAGE] [--model DIR] [--request FILE|-] [--json]`: what a model would see for a
 * chat request — the prompt its chat template renders (tools, reasoning switch, history included) and
 * its tokens — built by the same function the daemon builds prompts with. Offline: reads the model
 * directory's tokenizer files only. The daemon answers the same at POST /apply-template.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { loadTokenizer } from '@orchard/engine';
import { preparePrompt } from '../../prompt/prepare.js';
import { DialectError } from '../../requests/errors.js';
import { chatCompletionSchema, describeIssue } from '../../http/schemas.js';
import { chatServeRequest } from '../../http/openai.js';
import { CliError } from '../errors.js';

/** The bundled demo model, relative to the repository root. */
const BUNDLED_MODEL = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../../models/orchard-demo');

interface TemplateFlags {
  model?: string;
  request?: string;
  json?: boolean;
}

export function registerTemplate(program: Command): void {
  program
    .command('template')
    .description('show the prompt (and its tokens) a chat request becomes for a model: its chat template rendered with the messages, tools and options')
    .argument('[message]', 'one user message (instead of --request)')
    .option('--model <dir>', 'Hugging Face model directory (default: the bundled models/orchard-demo)')
    .option('--request <file>', "an OpenAI chat completions body as JSON (messages, tools, tool_choice, reasoning_effort, ...); '-' reads stdin")
    .option('--json', 'print {prompt, tokens, token_count, tool_call_format} (stable contract)')
    .action((message: string | undefined, opts: TemplateFlags) => {
      if ((message === undefined) === (opts.request === undefined)) throw new CliError('give a MESSAGE or --request FILE (one of them)', 2);
      const dir = resolve(opts.model ?? BUNDLED_MODEL);
      let tok;
      try {
        tok = loadTokenizer(dir);
      } catch (err) {
        throw new CliError(`cannot read the tokenizer of ${dir}: ${(err as Error).message}`, 2);
      }
      const name = basename(dir);
      const body = message !== undefined ? { model: name, messages: [{ role: 'user', content: message }] } : readRequest(opts.request!, name);
      const parsed = chatCompletionSchema.safeParse(body);
      if (!parsed.success) {
        const { message: why } = describeIssue(parsed.error);
        throw new CliError(`--request: ${why}`, 2);
      }
      try {
        const p = preparePrompt(tok, name, chatServeRequest(parsed.data));
        process.stdout.write(opts.json ? `${JSON.stringify({ prompt: p.text, tokens: p.ids, token_count: p.ids.length, tool_call_format: p.format })}\n` : `${p.text}${p.text.endsWith('\n') ? '' : '\n'}-- ${p.ids.length} tokens${p.format ? `, tool calls in the ${p.format} format` : ''}\n`);
      } catch (err) {
        if (err instanceof DialectError) throw new CliError(err.param ? `${err.param}: ${err.message}` : err.message, 2);
        throw err;
      }
    });
}

function readRequest(file: string, model: string): unknown {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new CliError(`--request: cannot read ${file}: ${(err as Error).message}`, 2);
  }
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    return body && typeof body === 'object' && !Array.isArray(body) ? { model, ...body } : body;
  } catch (err) {
    throw new CliError(`--request: ${file} is not JSON: ${(err as Error).message}`, 2);
  }
}
