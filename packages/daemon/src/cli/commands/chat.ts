/**
 * `orchard chat [MODEL] [--url]`: a terminal chat with the pod. Streams the reply as it is generated,
 * keeps the conversation (leaving out the oldest turns when it outgrows the model's context, with a
 * note), and prints tokens/s after each answer. An error is said and the chat goes on. Its own
 * commands (/help, /reset, /exit; chat-commands.ts) are answered here, never sent to the model.
 */
import type { Command } from 'commander';
import { createInterface } from 'node:readline';
import { cliSettings } from '../../config/cli.js';
import { CliError } from '../errors.js';
import { contextTokens } from './load.js';
import { call, sseData } from './serve-client.js';
import { CHAT_HELP, parseChatLine } from './chat-commands.js';
import { Conversation, type ChatMessage } from '@orchard/dashboard/conversation';
import { paint, paintOut } from '../../colors.js';
import { ensureDaemon, openSession, type SessionOptions } from '../model-session.js';

interface ChatOptions {
  url: string;
  token?: string;
  maxTokens: string;
  temperature: string;
  system?: string;
  message?: string;
}

function number(name: string, v: string, ok: (n: number) => boolean): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new CliError(`${name}: bad value ${JSON.stringify(v)}`, 2);
  return n;
}

/**
 * Streams one answer to `out`; returns the text and the speed seen by the client. A reasoning model's
 * thoughts go to `think` (the chat writes them dimmed to stderr, so stdout holds only the answer).
 */
export async function streamReply(opts: ChatOptions, model: string, messages: ChatMessage[], out: (s: string) => void, think: (s: string) => void = () => {}) {
  const body = {
    model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: number('--max-tokens', opts.maxTokens, (n) => Number.isInteger(n) && n >= 1),
    temperature: number('--temperature', opts.temperature, (n) => n >= 0 && n <= 2),
  };
  // The clock starts when the request leaves: the first token's wait includes the prompt's prefill
  // (and a placement, if the model was not loaded), which arrives after the response headers.
  const t0 = performance.now();
  const res = await call(opts, 'POST', '/v1/chat/completions', body, 600_000);
  let first = 0;
  let text = '';
  let tokens = 0;
  let promptTokens: number | null = null;
  let finishReason: string | null = null;
  let thinking = false;
  for await (const data of sseData(res)) {
    if (data === '[DONE]') {
      // Let go of the connection now: a server that keeps it open would keep this process alive.
      await res.body?.cancel().catch(() => undefined);
      break;
    }
    const chunk = JSON.parse(data) as {
      error?: { message: string };
      choices?: { delta?: { content?: string; reasoning_content?: string }; finish_reason?: string | null }[];
      usage?: { prompt_tokens: number; completion_tokens: number };
    };
    if (chunk.error) throw new CliError(`the pod stopped answering: ${chunk.error.message}`, 1);
    const thought = chunk.choices?.[0]?.delta?.reasoning_content;
    if (thought) {
      if (!first) first = performance.now();
      thinking = true;
      think(thought);
    }
    const piece = chunk.choices?.[0]?.delta?.content;
    if (piece) {
      if (!first) first = performance.now();
      if (thinking) think('\n');
      thinking = false;
      text += piece;
      out(piece);
    }
    finishReason = chunk.choices?.[0]?.finish_reason ?? finishReason;
    if (chunk.usage) {
      tokens = chunk.usage.completion_tokens;
      promptTokens = chunk.usage.prompt_tokens;
    }
  }
  const end = performance.now();
  // Pieces can arrive in one burst (a small model outruns the stream): then time the whole request.
  const secs = first ? ((end - first > 20 ? end - first : end - t0) / 1000) : 0;
  return { text, tokens, promptTokens, finishReason, tokensPerSecond: secs > 0 && tokens > 1 ? (tokens - 1) / secs : null, firstTokenMs: first ? first - t0 : null };
}


/** The chat itself, with a model the pod serves: questions from stdin (or one with -m), answers streamed. */
export async function runChat(opts: ChatOptions, model: string): Promise<void> {
  const maxTokens = number('--max-tokens', opts.maxTokens, (n) => Number.isInteger(n) && n >= 1);
  const conversation = new Conversation({ system: opts.system, maxTokens });
  /** One question; an error is said and the conversation goes on (unless `fatal`: one-shot `-m`). */
  const ask = async (content: string, fatal: boolean) => {
    let stats: Awaited<ReturnType<typeof streamReply>> | null = null;
    const r = await conversation.ask(content, async (messages) => {
      stats = await streamReply(opts, model, messages, (s) => process.stdout.write(s), (s) => process.stderr.write(paint.dim(s)));
      return { text: stats.text, finishReason: stats.finishReason, promptTokens: stats.promptTokens, completionTokens: stats.tokens };
    });
    if (r.error !== undefined) {
      const message = (r.error as Error)?.message ?? String(r.error);
      if (fatal) throw r.error instanceof CliError ? r.error : new CliError(message, 1);
      process.stderr.write(`\n${paint.red(`orchard: ${message.replace(/^POST \/v1\/chat\/completions: /, '')}`)} ${paint.dim('(the conversation goes on)')}\n`);
      return;
    }
    const s = stats!;
    const speed = s.tokensPerSecond ? `${s.tokensPerSecond.toFixed(1)} tok/s` : 'n/a tok/s';
    process.stderr.write(`\n${paint.dim(`[${s.tokens} tokens, ${speed}${s.firstTokenMs !== null ? `, first token ${s.firstTokenMs.toFixed(0)} ms` : ''}]`)}\n`);
    for (const note of r.notes) process.stderr.write(`${paint.yellow(`(${note})`)}\n`);
  };
  if (opts.message !== undefined) {
    await ask(opts.message, true);
    return;
  }
  // The line iterator buffers lines typed (or piped) while an answer is streaming.
  const rl = createInterface({ input: process.stdin, terminal: false });
  process.stderr.write(`chatting with ${paint.bold(model)} at ${opts.url} — /help lists the commands, /exit or Ctrl-D quits\n`);
  const prompt = () => process.stdout.write(paintOut.cyan('> '));
  try {
    prompt();
    for await (const raw of rl) {
      const line = parseChatLine(raw);
      if (line.kind === 'exit') break;
      if (line.kind === 'reset') {
        conversation.reset();
        process.stderr.write('(conversation cleared)\n');
      } else if (line.kind === 'help') process.stderr.write(`${CHAT_HELP}\n`);
      else if (line.kind === 'unknown') process.stderr.write(`${paint.yellow(`unknown command ${line.command}`)} — /help lists them; //… sends a line starting with / to the model\n`);
      else if (line.kind === 'ask') await ask(line.text, false);
      prompt();
    }
  } finally {
    rl.close();
    process.stdout.write('\n');
  }
}

export function registerChat(program: Command): void {
  program
    .command('chat')
    .description('chat with a model served by the pod (streams tokens, keeps the conversation)')
    .argument('[model]', 'orchard-demo, a name from `orchard models --available`, ORG/NAME[:QUANT] (pulled if missing) or a model directory (default: the only model the pod serves, else orchard-demo)')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .option('--max-tokens <n>', 'most tokens per answer', '256')
    .option('--temperature <t>', 'sampling temperature (0 = greedy)', '0.7')
    .option('--system <text>', 'system message')
    .option('-m, --message <text>', 'send one message, print the answer and exit')
    .option('--data-dir <dir>', 'data directory of the daemon started for this session, when none runs (default ~/.orchard)')
    .option('-y, --yes', 'pull a missing model without asking')
    .option('--context <tokens>', "tokens per sequence (prompt + answer) when the model is placed now; default: the daemon's", contextTokens)
    .action(chatCommand);
}

async function chatCommand(modelArg: string | undefined, opts: ChatOptions & SessionOptions): Promise<void> {
  if (modelArg) {
    const session = await openSession(modelArg, opts);
    try {
      await runChat(opts, session.model);
    } finally {
      await session.close();
    }
    return;
  }
  const daemon = await ensureDaemon(opts);
  try {
    const { data } = (await (await call(opts, 'GET', '/v1/models')).json()) as { data: { id: string }[] };
    const model = data.length === 1 ? data[0].id : data.some((m) => m.id === 'orchard-demo') ? 'orchard-demo' : undefined;
    if (!model) throw new CliError(data.length ? `the pod serves ${data.map((m) => m.id).join(', ')}: name one` : 'the pod serves no model yet', 2);
    await runChat(opts, model);
  } finally {
    await daemon.stop();
  }
}
