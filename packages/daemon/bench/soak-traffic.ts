/**
 * The requests of `pnpm bench:soak`: a seeded mix over the OpenAI, Anthropic and Ollama routes of one
 * daemon — plain and streamed answers, clients that vanish after the first streamed bytes, and
 * malformed bodies — each sent with a deadline and judged by soak-stats.ts.
 */
import type { Outcome, RequestKind } from './soak-stats.js';

interface Route {
  name: string;
  path: string;
  body(model: string, prompt: string, stream: boolean): unknown;
  /** A body of this route with a field of the wrong type (Ollama answers a bare model with 200: it loads it). */
  wrongType(model: string): unknown;
  /** Whether a finished stream's text holds its dialect's end marker and no error event. */
  streamEnd(text: string): string | null;
}

const MAX_TOKENS = 12;

const ROUTES: Route[] = [
  {
    name: 'openai completions',
    path: '/v1/completions',
    body: (model, prompt, stream) => ({ model, prompt, max_tokens: MAX_TOKENS, temperature: 0.7, stream }),
    wrongType: (model) => ({ model, prompt: 'x', max_tokens: 'many' }),
    streamEnd: openaiEnd,
  },
  {
    name: 'openai chat',
    path: '/v1/chat/completions',
    body: (model, prompt, stream) => ({ model, messages: [{ role: 'user', content: prompt }], max_tokens: MAX_TOKENS, stream }),
    wrongType: (model) => ({ model, messages: 'hello' }),
    streamEnd: openaiEnd,
  },
  {
    name: 'anthropic messages',
    path: '/v1/messages',
    body: (model, prompt, stream) => ({ model, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: prompt }], stream }),
    wrongType: (model) => ({ model, max_tokens: -5, messages: [{ role: 'user', content: 'x' }] }),
    streamEnd: (t) => (/^event: error/m.test(t) ? 'error event in the stream' : t.includes('event: message_stop') ? null : 'stream ended without message_stop'),
  },
  {
    name: 'ollama chat',
    path: '/api/chat',
    body: (model, prompt, stream) => ({ model, messages: [{ role: 'user', content: prompt }], stream, options: { num_predict: MAX_TOKENS } }),
    wrongType: (model) => ({ model, messages: 'hello' }),
    streamEnd: ollamaEnd,
  },
  {
    name: 'ollama generate',
    path: '/api/generate',
    body: (model, prompt, stream) => ({ model, prompt, stream, options: { num_predict: MAX_TOKENS } }),
    wrongType: (model) => ({ model, prompt: 42 }),
    streamEnd: ollamaEnd,
  },
];

function openaiEnd(t: string): string | null {
  if (/^data: \{"error"/m.test(t)) return 'error event in the stream';
  return t.includes('data: [DONE]') ? null : 'stream ended without [DONE]';
}

function ollamaEnd(t: string): string | null {
  const lines = t.split('\n').filter(Boolean);
  if (lines.some((l) => l.startsWith('{"error"'))) return 'error line in the stream';
  return lines.length && /"done":\s*true/.test(lines[lines.length - 1]) ? null : 'stream ended without done: true';
}

/** Bodies a client might send by mistake: each must get a 4xx naming the problem, never a 5xx. */
const MALFORMED: ((model: string, route: Route) => string)[] = [
  () => '{"model": "orchard-demo", "prompt": "cut off',
  () => 'not json at all',
  (model, route) => JSON.stringify(route.wrongType(model)),
  () => JSON.stringify({ prompt: 'no model', messages: [{ role: 'user', content: 'no model' }] }),
  (model) => JSON.stringify([model]),
];

const PROMPTS = ['In the beginning', 'And God said', 'The sea', 'Let there be light', 'And the evening'];

export interface TrafficOptions {
  base: string;
  model: string;
  /** Deadline of one request, ms: past it the request is a hang. */
  requestTimeoutMs: number;
}

/** Sends one request of a kind drawn from `rand` and says how it ended. */
export async function oneRequest(o: TrafficOptions, rand: () => number): Promise<Outcome> {
  const route = ROUTES[Math.floor(rand() * ROUTES.length)];
  const x = rand();
  const kind: RequestKind = x < 0.3 ? 'ok' : x < 0.7 ? 'ok-stream' : x < 0.85 ? 'vanish' : 'malformed';
  const prompt = PROMPTS[Math.floor(rand() * PROMPTS.length)];
  const body = kind === 'malformed' ? MALFORMED[Math.floor(rand() * MALFORMED.length)](o.model, route) : JSON.stringify(route.body(o.model, prompt, kind !== 'ok'));
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort(new Error('request deadline'));
  }, o.requestTimeoutMs);
  const t0 = performance.now();
  const done = (r: Partial<Outcome>): Outcome => ({ kind, route: route.name, status: 0, ...r, timedOut, ms: performance.now() - t0 });
  try {
    const res = await fetch(o.base + route.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: abort.signal });
    if (kind === 'vanish' && res.ok && res.body) {
      // Read the first bytes, then go away mid-stream as a closed laptop would.
      const reader = res.body.getReader();
      await reader.read();
      abort.abort(new Error('client vanished'));
      await reader.cancel().catch(() => undefined);
      return done({ status: res.status });
    }
    const text = await res.text();
    return done({ status: res.status, brokenStream: kind === 'ok-stream' && res.ok ? (route.streamEnd(text) ?? undefined) : undefined });
  } catch (err) {
    return done({ error: (err as Error).message });
  } finally {
    clearTimeout(timer);
  }
}
