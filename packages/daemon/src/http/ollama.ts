/**
 * Ollama's API on the daemon's port, errors as {"error": "..."}: POST /api/chat and /api/generate
 * (NDJSON streams unless "stream": false), GET /api/tags, POST /api/show, GET /api/ps, GET
 * /api/version, POST /api/pull (NDJSON progress from the model store), POST /api/embed and the older
 * /api/embeddings (serving/embedder.ts). Orchard's own /api routes (cluster, status, events, plan, instances, models/pull)
 * do not collide with these paths.
 */
import type { Logger } from 'pino';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodError } from 'zod';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Serving } from '../serving/serving.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { ollamaChatRequest, ollamaChatSchema, ollamaDone, ollamaGenerateRequest, ollamaGenerateSchema, ollamaMessagePart, resolveOllamaModel } from '../dialects/ollama.js';
import { ollamaEmbedRequest, shaped } from '../dialects/embeddings.js';
import { errorStatus, localTokenizer, runOn, runStreaming, runToEnd } from './dialect-support.js';

/** The Ollama version this API follows (clients check it). */
export const OLLAMA_API_VERSION = '0.6.0';

const fail = (reply: FastifyReply, status: number, error: string) => reply.code(status).send({ error });

function issue(err: ZodError): string {
  const i = err.issues[0];
  return `${i?.path.length ? `${i.path.join('.')}: ` : ''}${i?.message ?? 'invalid body'}`;
}

/** The model's config.json (when this node holds it). */
function configOf(serving: Serving, model: string): Record<string, unknown> {
  const dir = serving.catalog.dirOf(model);
  if (!dir || !existsSync(join(dir, 'config.json'))) return {};
  try {
    return JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  } catch {
    return {};
  }
}

function details(serving: Serving, model: string) {
  const c = configOf(serving, model);
  const family = String(c.model_type ?? 'unknown');
  return { parent_model: '', format: 'safetensors', family, families: [family], parameter_size: '', quantization_level: String(c.torch_dtype ?? 'unknown').toUpperCase() };
}

export function ollamaRoutes(app: FastifyInstance, serving: Serving, log?: Logger): void {
  const run = runOn(serving, log);
  const models = () => serving.router.models();
  const created = () => new Date().toISOString();

  /** Runs `sreq`, answering with NDJSON lines (stream) or one object; `line` shapes each event. */
  async function answer(reply: FastifyReply, model: string, sreq: ServeRequest, stream: boolean, line: (e: ServeEvent) => Record<string, unknown> | null, final: (acc: Record<string, unknown>) => Record<string, unknown>) {
    const t0 = performance.now();
    let first: number | null = null;
    if (!stream) {
      const parts: Record<string, unknown>[] = [];
      const r = await runToEnd(run, model, sreq, reply, (e) => {
        const l = line(e);
        if (l) (first ??= performance.now()), parts.push(l);
      });
      if ('error' in r) return fail(reply, r.error.status, r.error.message);
      return { model, created_at: created(), ...final({ parts }), ...ollamaDone(r.done, t0, first) };
    }
    const json = (v: unknown) => JSON.stringify(v) + '\n';
    await runStreaming(run, model, sreq, reply, {
      contentType: 'application/x-ndjson',
      frame: (e) => {
        if (e.type === 'done') return json({ model, created_at: created(), ...final({ parts: [] }), ...ollamaDone(e, t0, first) });
        const l = line(e);
        if (!l) return '';
        first ??= performance.now();
        return json({ model, created_at: created(), ...l, done: false });
      },
      errorBody: (e) => ({ error: e.message }),
      midStreamError: (e) => json({ error: e.message }),
    });
  }

  app.post('/api/chat', async (req, reply) => {
    const p = ollamaChatSchema.safeParse(req.body ?? {});
    if (!p.success) return fail(reply, 400, issue(p.error));
    const model = resolveOllamaModel(p.data.model, models());
    if (!model) return fail(reply, 404, serving.catalog.unlisted(p.data.model) ?? `model '${p.data.model}' not found`);
    serving.keepAlive(model, p.data.keep_alive);
    let sreq;
    try {
      sreq = ollamaChatRequest(p.data);
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message);
    }
    const line = (e: ServeEvent) => {
      const message = ollamaMessagePart(e);
      return message ? { message } : null;
    };
    return answer(reply, model, sreq, p.data.stream, line, ({ parts }) => {
      // One object: the parts joined; the stream's last line: an empty message.
      const ms = (parts as { message: { content?: string; thinking?: string; tool_calls?: unknown[] } }[]).map((x) => x.message);
      const msg: Record<string, unknown> = { role: 'assistant', content: ms.map((x) => x.content ?? '').join('') };
      const thinking = ms.map((x) => x.thinking ?? '').join('');
      const calls = ms.flatMap((x) => x.tool_calls ?? []);
      if (thinking) msg.thinking = thinking;
      if (calls.length) msg.tool_calls = calls;
      return { message: msg };
    });
  });

  app.post('/api/generate', async (req, reply) => {
    const p = ollamaGenerateSchema.safeParse(req.body ?? {});
    if (!p.success) return fail(reply, 400, issue(p.error));
    const model = resolveOllamaModel(p.data.model, models());
    if (!model) return fail(reply, 404, serving.catalog.unlisted(p.data.model) ?? `model '${p.data.model}' not found`);
    serving.keepAlive(model, p.data.keep_alive);
    // An empty prompt loads the model in Ollama (keep_alive 0: unloads it); here every model is loaded
    // on demand, and an unload happens at the next serving tick: answer done.
    if (!p.data.prompt && !p.data.system) return { model, created_at: created(), response: '', done: true, done_reason: p.data.keep_alive === 0 ? 'unload' : 'load' };
    let sreq;
    try {
      sreq = ollamaGenerateRequest(p.data);
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message);
    }
    const part = (e: ServeEvent) => (e.type === 'text' ? { response: e.text } : e.type === 'reasoning' ? { response: '', thinking: e.text } : null);
    return answer(reply, model, sreq, p.data.stream, part, ({ parts }) => ({ response: (parts as { response?: string }[]).map((x) => x.response ?? '').join('') }));
  });

  app.get('/api/tags', async () => ({
    models: models().map((name) => ({ name, model: name, modified_at: new Date(0).toISOString(), size: 0, digest: '', details: details(serving, name) })),
  }));

  app.post('/api/show', async (req, reply) => {
    const b = (req.body ?? {}) as { model?: unknown; name?: unknown };
    const asked = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : null;
    if (!asked) return fail(reply, 400, 'model: required');
    const model = resolveOllamaModel(asked, models());
    if (!model) return fail(reply, 404, `model '${asked}' not found`);
    let tok: ReturnType<typeof localTokenizer> = null;
    try {
      tok = localTokenizer(serving, model);
    } catch {
      /* shown without a template: a request to the model says why its tokenizer cannot be built */
    }
    const template = tok?.chatTemplate ?? '';
    const caps = tok?.chatTemplateCaps?.toolCalls ? ['completion', 'tools'] : ['completion'];
    return { modelfile: `FROM ${model}\n`, parameters: '', template, details: details(serving, model), model_info: configOf(serving, model), capabilities: caps, modified_at: new Date(0).toISOString() };
  });

  app.get('/api/ps', async () => ({
    models: Object.values(serving.router.instances()).map((e) => ({ name: e.model, model: e.model, size: 0, digest: '', details: details(serving, e.model), expires_at: new Date(Date.now() + 3600_000).toISOString(), size_vram: 0 })),
  }));

  app.get('/api/version', async () => ({ version: OLLAMA_API_VERSION }));

  app.post('/api/pull', async (req, reply) => {
    const b = (req.body ?? {}) as { model?: unknown; name?: unknown; stream?: unknown };
    const repo = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : null;
    if (!repo || !/^[\w.-]+\/[\w.-]+(:latest)?$/.test(repo)) return fail(reply, 400, 'model: a Hugging Face repository as ORG/NAME');
    const name = repo.replace(/:latest$/, '');
    if (b.stream === false) {
      try {
        await serving.pull(name);
        return { status: 'success' };
      } catch (err) {
        return fail(reply, 502, `pull ${name}: ${(err as Error).message}`);
      }
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    const line = (v: unknown) => !res.writableEnded && res.write(JSON.stringify(v) + '\n');
    line({ status: 'pulling manifest' });
    try {
      await serving.pull(name, undefined, { onProgress: (e) => line({ status: `pulling ${e.file}`, digest: e.file, total: e.total, completed: e.done }) });
      line({ status: 'verifying sha256 digest' });
      line({ status: 'success' });
    } catch (err) {
      line({ error: `pull ${name}: ${(err as Error).message}` });
    }
    res.end();
  });

  for (const path of ['/api/embed', '/api/embeddings']) {
    const legacy = path === '/api/embeddings';
    app.post(path, async (req, reply) => {
      const b = req.body;
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return fail(reply, 400, 'the body must be a JSON object');
      const t0 = process.hrtime.bigint();
      try {
        const r = ollamaEmbedRequest(b as Record<string, unknown>, legacy);
        const out = await serving.embedder.embed(r.model, r.inputs, r.truncate);
        const vectors = shaped(out.vectors, r.dimensions);
        if (legacy) return { embedding: vectors[0] };
        return { model: r.model, embeddings: vectors, total_duration: Number(process.hrtime.bigint() - t0), prompt_eval_count: out.promptTokens };
      } catch (err) {
        const e = errorStatus(err);
        return fail(reply, e.status, e.message);
      }
    });
  }
}
