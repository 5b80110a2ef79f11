/**
 * OpenAI-compatible endpoints and the instance endpoints, as a fastify plugin on the daemon's API:
 *   GET /v1/models, POST /v1/chat/completions, POST /v1/completions (SSE with `stream: true`),
 *   GET /api/plan?model=&strategy=&nodes=, GET/POST /api/instances, DELETE /api/instances/:id.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InstanceManager } from '../instances/manager.js';
import { publicInstance } from '../instances/public-instance.js';
import { ServeError, type ServeEvent, type ServeRequest } from '../instances/requests.js';
import { PlacementError } from '../placement/place.js';
import { UnknownModelError } from '../instances/models.js';
import { errorBody, sendError } from './errors.js';
import { logRequests } from '../request-log.js';
import type { Logger } from 'pino';
import { chatCompletionSchema, completionSchema, createInstanceSchema, describeIssue, planQuerySchema, textOf, type ChatCompletionBody, type CompletionBody } from './schemas.js';

export interface OpenAiDeps {
  manager: InstanceManager;
  /** Runs a request on some ready instance of `model` (here or on the node that drives it). */
  run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
  /** Models served by the pod (local files and placed instances). */
  models(): string[];
  /** Gets one line per generation request (request-log.ts). */
  log?: Logger;
}

const now = () => Math.floor(Date.now() / 1000);

function toServeRequest(body: ChatCompletionBody | CompletionBody, kind: 'chat' | 'completion'): ServeRequest {
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  const base = {
    kind,
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed ?? randomInt(0, 2 ** 31),
    stop,
  };
  if (kind === 'chat') return { ...base, messages: (body as ChatCompletionBody).messages.map((m) => ({ role: m.role, content: textOf(m.content) })) };
  const p = (body as CompletionBody).prompt;
  return { ...base, prompt: typeof p === 'string' ? p : p[0] };
}

export async function openAiRoutes(app: FastifyInstance, given: OpenAiDeps): Promise<void> {
  const deps = given.log ? { ...given, run: logRequests(given.run, given.log) } : given;
  const { manager } = deps;

  app.get('/v1/models', async () => ({
    object: 'list',
    data: deps.models().map((id) => ({ id, object: 'model', created: 0, owned_by: 'orchard' })),
  }));

  const handle = (kind: 'chat' | 'completion') => async (req: FastifyRequest, reply: FastifyReply) => {
    const schema = kind === 'chat' ? chatCompletionSchema : completionSchema;
    if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) return sendError(reply, 400, 'the body must be a JSON object', 'invalid_body');
    const parsed = schema.safeParse(req.body);
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    const body = parsed.data;
    if (!deps.models().includes(body.model)) return sendError(reply, 404, `the model '${body.model}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    const sreq = toServeRequest(body, kind);
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`;
    const created = now();
    const abort = new AbortController();
    let finished = false;
    reply.raw.on('close', () => {
      if (!finished) abort.abort();
    });
    if (body.stream) return streamAnswer(reply, kind, id, created, body.model, sreq, abort, !!body.stream_options?.include_usage, () => (finished = true));
    let text = '';
    let done: Extract<ServeEvent, { type: 'done' }> | null = null;
    try {
      await deps.run(body.model, sreq, (e) => {
        if (e.type === 'text') text += e.text;
        if (e.type === 'done') done = e;
      }, abort.signal);
    } catch (err) {
      finished = true;
      if (err instanceof ServeError) return sendError(reply, err.status === 499 ? 503 : err.status, err.message, err.code);
      throw err;
    }
    finished = true;
    const d = done as Extract<ServeEvent, { type: 'done' }> | null;
    if (!d) return sendError(reply, 503, 'the instance ended the request without an answer', 'instance_failed');
    const usage = { prompt_tokens: d.promptTokens, completion_tokens: d.completionTokens, total_tokens: d.promptTokens + d.completionTokens };
    if (kind === 'chat') {
      return { id, object: 'chat.completion', created, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: d.finishReason }], usage, system_fingerprint: null };
    }
    return { id, object: 'text_completion', created, model: body.model, choices: [{ index: 0, text, logprobs: null, finish_reason: d.finishReason }], usage };
  };

  async function streamAnswer(reply: FastifyReply, kind: 'chat' | 'completion', id: string, created: number, model: string, sreq: ServeRequest, abort: AbortController, includeUsage: boolean, finish: () => void) {
    reply.hijack();
    const res = reply.raw;
    let started = false;
    const write = (data: unknown) => {
      if (!res.writableEnded) res.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    const chunk = (delta: { role?: string; content?: string } | string, finishReason: string | null) =>
      kind === 'chat'
        ? { id, object: 'chat.completion.chunk', created, model, system_fingerprint: null, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] }
        : { id, object: 'text_completion', created, model, choices: [{ index: 0, text: delta as string, logprobs: null, finish_reason: finishReason }] };
    const begin = () => {
      if (started) return;
      started = true;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      if (kind === 'chat') write(chunk({ role: 'assistant', content: '' }, null));
    };
    try {
      await deps.run(model, sreq, (e) => {
        if (e.type === 'start') begin();
        else if (e.type === 'text') {
          begin();
          write(chunk(kind === 'chat' ? { content: e.text } : e.text, null));
        } else if (e.type === 'done') {
          begin();
          write(chunk(kind === 'chat' ? {} : '', e.finishReason));
          if (includeUsage) write({ id, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created, model, choices: [], usage: { prompt_tokens: e.promptTokens, completion_tokens: e.completionTokens, total_tokens: e.promptTokens + e.completionTokens } });
        }
      }, abort.signal);
      finish();
      if (!started) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify(errorBody(503, 'the instance ended the request without an answer', 'instance_failed')));
        return;
      }
      res.end('data: [DONE]\n\n');
    } catch (err) {
      finish();
      const e = err instanceof ServeError ? err : new ServeError(500, 'internal_error', 'internal error');
      const status = e.status === 499 ? 503 : e.status;
      if (!started) {
        res.writeHead(status, { 'content-type': 'application/json', ...(status === 429 || status === 503 ? { 'retry-after': '1' } : {}) });
        res.end(JSON.stringify(errorBody(status, e.message, e.code)));
        return;
      }
      // Mid-stream: an error event (the openai SDK raises it), then the end of the stream.
      write(errorBody(status, e.message, e.code));
      res.end();
    }
  }

  app.post('/v1/chat/completions', handle('chat'));
  app.post('/v1/completions', handle('completion'));

  app.get('/api/plan', async (req, reply) => {
    const q = planQuerySchema.safeParse(req.query);
    if (!q.success) return sendError(reply, 400, describeIssue(q.error).message, 'invalid_value');
    try {
      const { plan } = manager.planFor(q.data.model, { strategy: q.data.strategy, nodes: q.data.nodes });
      return { model: q.data.model, requested: { strategy: q.data.strategy, nodes: q.data.nodes ?? null }, plan };
    } catch (err) {
      if (err instanceof UnknownModelError) return sendError(reply, 404, err.message, 'model_not_found', 'model');
      if (err instanceof PlacementError) return sendError(reply, 503, err.message, 'placement_failed');
      throw err;
    }
  });

  app.get('/api/instances', async () => ({
    instances: Object.values(manager.instances()).map((e) => publicInstance(manager, e)),
  }));

  app.post('/api/instances', async (req, reply) => {
    const parsed = createInstanceSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    const b = parsed.data;
    if (!deps.models().includes(b.model)) return sendError(reply, 404, `the model '${b.model}' does not exist in this pod`, 'model_not_found', 'model');
    try {
      const deadline = Date.now() + 120_000;
      // The instance found or placed can be removed while we wait (a DELETE or a coordinator's
      // re-placement racing with this call): then place again rather than fail the caller.
      for (let attempt = 0; ; attempt++) {
        const entry = await manager.ensurePlaced(b.model, { strategy: b.strategy, nodes: b.nodes }, b.strategy !== 'auto');
        let removed = false;
        if (b.wait) {
          while (!manager.isReady(entry.id)) {
            const s = manager.statusOf(entry.id);
            if (s?.failed) return sendError(reply, 503, `instance ${entry.id} failed: ${s.failed}`, 'instance_failed');
            if (!manager.instances()[entry.id]) {
              removed = true;
              break;
            }
            if (Date.now() > deadline) return sendError(reply, 503, `instance ${entry.id} did not become ready within 120 s`, 'instance_not_ready');
            await new Promise((r) => setTimeout(r, 200));
          }
        }
        if (!removed) return reply.code(201).send({ instance: publicInstance(manager, manager.instances()[entry.id] ?? entry) });
        if (attempt >= 2) return sendError(reply, 503, `instance ${entry.id} was removed before it became ready`, 'instance_failed');
        await new Promise((r) => setTimeout(r, 500));
      }
    } catch (err) {
      if (err instanceof ServeError) return sendError(reply, err.status, err.message, err.code);
      throw err;
    }
  });

  app.delete('/api/instances/:id', async (req, reply) => {
    const id = (req.params as { id: string }).id;
    try {
      if (!(await manager.remove(id))) return sendError(reply, 404, `no instance ${id}`, 'instance_not_found');
      return reply.code(204).send();
    } catch (err) {
      if (err instanceof ServeError) return sendError(reply, err.status, err.message, err.code);
      throw err;
    }
  });
}
