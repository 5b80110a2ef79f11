/**
 * Ollama's API on the daemon's port, errors as {"error": "..."}: POST /api/chat and /api/generate
 * (NDJSON streams unless "stream": false), GET /api/tags, POST /api/show, GET /api/ps, GET
 * /api/version, POST /api/pull (NDJSON progress from the model store), POST /api/embed (not yet: a
 * 501 saying so). Orchard's own /api routes (cluster, status, events, plan, instances, models/pull)
 * do not collide with these paths.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodError } from 'zod';
import type { ServeEvent, ServeRequest } from '../../instances/requests.js';
import { ollamaChatRequest, ollamaChatSchema, ollamaDone, ollamaGenerateRequest, ollamaGenerateSchema, ollamaMessagePart, resolveOllamaModel } from '../ollama.js';
import { clientGone, errorStatus, localTokenizer, type DialectDeps } from './deps.js';

/** The Ollama version this API follows (clients check it). */
export const OLLAMA_API_VERSION = '0.6.0';

export interface OllamaDeps extends DialectDeps {
  /** Downloads a model into this node's store, reporting bytes per file. */
  pull(repo: string, onProgress: (e: { file: string; done: number; total: number }) => void): Promise<unknown>;
}

const fail = (reply: FastifyReply, status: number, error: string) => reply.code(status).send({ error });

function issue(err: ZodError): string {
  const i = err.issues[0];
  return `${i?.path.length ? `${i.path.join('.')}: ` : ''}${i?.message ?? 'invalid body'}`;
}

function details(deps: DialectDeps, model: string) {
  let family = 'unknown';
  let parameterSize = '';
  let quantization = 'F16';
  try {
    const info = deps.manager.catalog.info(model);
    family = String(info.rawConfig.model_type ?? family);
    const params = info.shape.weightsBytes / 2;
    parameterSize = params >= 1e9 ? `${(params / 1e9).toFixed(1)}B` : `${(params / 1e6).toFixed(1)}M`;
    quantization = String(info.rawConfig.torch_dtype ?? 'F16').toUpperCase();
  } catch {
    /* not on this node: generic details */
  }
  return { parent_model: '', format: 'safetensors', family, families: [family], parameter_size: parameterSize, quantization_level: quantization };
}

export async function ollamaRoutes(app: FastifyInstance, deps: OllamaDeps): Promise<void> {
  const created = () => new Date().toISOString();

  /** Runs `sreq`, answering with NDJSON lines (stream) or one object; `line` shapes each event. */
  async function answer(reply: FastifyReply, model: string, sreq: ServeRequest, stream: boolean, line: (e: ServeEvent) => Record<string, unknown> | null, final: (acc: Record<string, unknown>) => Record<string, unknown>) {
    const gone = clientGone(reply);
    const t0 = performance.now();
    let first: number | null = null;
    if (!stream) {
      const parts: Record<string, unknown>[] = [];
      let done: Extract<ServeEvent, { type: 'done' }> | null = null;
      try {
        await deps.run(model, sreq, (e) => {
          if (e.type === 'done') done = e;
          else {
            const l = line(e);
            if (l) (first ??= performance.now()), parts.push(l);
          }
        }, gone.signal);
      } catch (err) {
        gone.finish();
        const e = errorStatus(err);
        return fail(reply, e.status, e.message);
      }
      gone.finish();
      if (!done) return fail(reply, 503, 'the instance ended the request without an answer');
      return { model, created_at: created(), ...final({ parts }), ...ollamaDone(done, t0, first) };
    }
    reply.hijack();
    const res = reply.raw;
    let started = false;
    const write = (v: unknown) => {
      if (!started) {
        started = true;
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      }
      if (!res.writableEnded) res.write(JSON.stringify(v) + '\n');
    };
    try {
      await deps.run(model, sreq, (e) => {
        if (e.type === 'done') write({ model, created_at: created(), ...final({ parts: [] }), ...ollamaDone(e, t0, first) });
        else {
          const l = line(e);
          if (l) {
            first ??= performance.now();
            write({ model, created_at: created(), ...l, done: false });
          }
        }
      }, gone.signal);
      gone.finish();
      res.end();
    } catch (err) {
      gone.finish();
      let e;
      try {
        e = errorStatus(err);
      } catch {
        e = { status: 500, message: 'internal error' };
      }
      if (!started) {
        res.writeHead(e.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: e.message }));
        return;
      }
      write({ error: e.message });
      res.end();
    }
  }

  app.post('/api/chat', async (req, reply) => {
    const p = ollamaChatSchema.safeParse(req.body ?? {});
    if (!p.success) return fail(reply, 400, issue(p.error));
    const model = resolveOllamaModel(p.data.model, deps.models());
    if (!model) return fail(reply, 404, `model '${p.data.model}' not found`);
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
    const model = resolveOllamaModel(p.data.model, deps.models());
    if (!model) return fail(reply, 404, `model '${p.data.model}' not found`);
    // An empty prompt loads the model in Ollama; here every model is loaded on demand: answer done.
    if (!p.data.prompt && !p.data.system) return { model, created_at: created(), response: '', done: true, done_reason: 'load' };
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
    models: deps.models().map((name) => ({ name, model: name, modified_at: new Date(0).toISOString(), size: 0, digest: '', details: details(deps, name) })),
  }));

  app.post('/api/show', async (req, reply) => {
    const b = (req.body ?? {}) as { model?: unknown; name?: unknown };
    const asked = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : null;
    if (!asked) return fail(reply, 400, 'model: required');
    const model = resolveOllamaModel(asked, deps.models());
    if (!model) return fail(reply, 404, `model '${asked}' not found`);
    const tok = localTokenizer(deps, model);
    const template = tok?.chatTemplate ?? '';
    const caps = tok?.chatTemplateCaps?.toolCalls ? ['completion', 'tools'] : ['completion'];
    let info: Record<string, unknown> = {};
    try {
      info = deps.manager.catalog.info(model).rawConfig;
    } catch {
      /* remote model */
    }
    return { modelfile: `FROM ${model}\n`, parameters: '', template, details: details(deps, model), model_info: info, capabilities: caps, modified_at: new Date(0).toISOString() };
  });

  app.get('/api/ps', async () => ({
    models: Object.values(deps.manager.instances()).map((e) => ({ name: e.model, model: e.model, size: 0, digest: '', details: details(deps, e.model), expires_at: new Date(Date.now() + 3600_000).toISOString(), size_vram: 0 })),
  }));

  app.get('/api/version', async () => ({ version: OLLAMA_API_VERSION }));

  app.post('/api/pull', async (req, reply) => {
    const b = (req.body ?? {}) as { model?: unknown; name?: unknown; stream?: unknown };
    const repo = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : null;
    if (!repo || !/^[\w.-]+\/[\w.-]+(:latest)?$/.test(repo)) return fail(reply, 400, 'model: a Hugging Face repository as ORG/NAME');
    const name = repo.replace(/:latest$/, '');
    if (b.stream === false) {
      try {
        await deps.pull(name, () => undefined);
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
      await deps.pull(name, (e) => line({ status: `pulling ${e.file}`, digest: e.file, total: e.total, completed: e.done }));
      line({ status: 'verifying sha256 digest' });
      line({ status: 'success' });
    } catch (err) {
      line({ error: `pull ${name}: ${(err as Error).message}` });
    }
    res.end();
  });

  for (const path of ['/api/embed', '/api/embeddings']) {
    app.post(path, async (_req, reply) => fail(reply, 501, 'embeddings are not supported by this Orchard version yet'));
  }
}
