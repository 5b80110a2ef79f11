/**
 * OpenAI SDK client run inside a test namespace (the daemons' APIs listen on the namespace's loopback).
 * Usage: node --import tsx test/serve/client.ts <mode> '<json args>'; prints JSON (or JSON lines).
 */
import OpenAI from 'openai';

const [mode, rawArgs] = process.argv.slice(2);
const args = JSON.parse(rawArgs ?? '{}');
const client = new OpenAI({ baseURL: `${args.base ?? 'http://127.0.0.1:52415'}/v1`, apiKey: args.token ?? 'none', maxRetries: 0, timeout: 120_000 });
const print = (v: unknown) => process.stdout.write(JSON.stringify(v) + '\n');

function describe(err: unknown) {
  const e = err as { status?: number; message?: string; error?: unknown };
  return { status: e.status ?? null, message: e.message ?? String(err) };
}

async function streamChat(body: Record<string, unknown>, onPiece?: (p: string) => void) {
  const params = { ...body, stream: true, stream_options: { include_usage: true } } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming;
  const stream = await client.chat.completions.create(params);
  let text = '';
  let finish: string | null = null;
  let usage: unknown = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c?.delta?.content) {
      text += c.delta.content;
      onPiece?.(c.delta.content);
    }
    if (c?.finish_reason) finish = c.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, finish, usage };
}

async function streamCompletion(body: Record<string, unknown>) {
  const stream = await client.completions.create({ ...body, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming);
  let text = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  return { text, finish };
}

switch (mode) {
  case 'chat': {
    const r = await client.chat.completions.create(args.body);
    print({ text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage });
    break;
  }
  case 'chat-stream':
    print(await streamChat(args.body));
    break;
  case 'completion': {
    const r = await client.completions.create(args.body);
    print({ text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage });
    break;
  }
  case 'completion-stream':
    print(await streamCompletion(args.body));
    break;
  case 'models':
    print((await client.models.list()).data.map((m) => m.id));
    break;
  case 'stream-log': {
    // One JSON line per piece as it arrives, then one for the end or the error, each with a timestamp.
    try {
      const r = await streamChat(args.body, (p) => print({ t: Date.now(), kind: 'piece', p }));
      print({ t: Date.now(), kind: 'end', ...r });
    } catch (err) {
      print({ t: Date.now(), kind: 'error', ...describe(err) });
    }
    break;
  }
  case 'completion-stream-log': {
    // Like stream-log, for a completion (a raw prompt, no chat template): pieces with timestamps, then the end or the error.
    try {
      const stream = await client.completions.create({ ...args.body, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming);
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        const piece = chunk.choices[0]?.text ?? '';
        if (piece) print({ t: Date.now(), kind: 'piece', p: piece });
        text += piece;
        if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      }
      print({ t: Date.now(), kind: 'end', text, finish });
    } catch (err) {
      print({ t: Date.now(), kind: 'error', ...describe(err) });
    }
    break;
  }
  case 'until-ok': {
    // Retries a non-streaming request until it succeeds or the deadline passes.
    const deadline = Date.now() + args.withinMs;
    const errors: unknown[] = [];
    for (;;) {
      try {
        const r = await client.chat.completions.create(args.body);
        print({ ok: true, t: Date.now(), text: r.choices[0].message.content, errors: errors.slice(-5) });
        break;
      } catch (err) {
        errors.push(describe(err));
        if (Date.now() > deadline) {
          print({ ok: false, t: Date.now(), errors: errors.slice(-5) });
          break;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    break;
  }
  case 'concurrent': {
    const results = await Promise.all(
      (args.prompts as string[]).map(async (content, i) => {
        try {
          const r = args.kind === 'completion' ? await streamCompletion({ ...args.body, prompt: content }) : await streamChat({ ...args.body, messages: [{ role: 'user', content }] });
          return { i, ok: true, text: r.text, finish: r.finish };
        } catch (err) {
          return { i, ok: false, ...describe(err) };
        }
      }),
    );
    print(results);
    break;
  }
  default:
    throw new Error(`unknown mode ${mode}`);
}
