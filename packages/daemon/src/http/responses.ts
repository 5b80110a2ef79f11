/**
 * The OpenAI routes beyond chat and completions: POST /v1/responses (the Responses API, JSON or SSE),
 * GET /v1/models/{id}, and POST /v1/embeddings (not yet: a 501 saying so), with OpenAI's error shape.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Serving } from '../serving/serving.js';
import type { ServeEvent } from '../serving/requests.js';
import { ResponseBuilder, responsesRequest } from '../dialects/responses.js';
import { clientGone, errorStatus, runOn } from './dialect-support.js';
import { errorBody, sendError } from './errors.js';

export function responsesRoutes(app: FastifyInstance, serving: Serving): void {
  const run = runOn(serving);
  app.post('/v1/embeddings', async (_req, reply) => sendError(reply, 501, 'embeddings are not supported by this Orchard version yet', 'not_implemented'));

  // Model ids contain a slash (org/name): the wildcard takes the rest of the path.
  app.get('/v1/models/*', async (req, reply) => {
    const id = decodeURIComponent((req.params as { '*': string })['*']);
    if (!serving.router.models().includes(id)) return sendError(reply, 404, `the model '${id}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    return { id, object: 'model', created: 0, owned_by: 'orchard' };
  });

  app.post('/v1/responses', async (req, reply: FastifyReply) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    if (typeof b !== 'object' || Array.isArray(b)) return sendError(reply, 400, 'the body must be a JSON object', 'invalid_body');
    let sreq;
    try {
      sreq = responsesRequest(b);
    } catch (err) {
      const e = errorStatus(err);
      return sendError(reply, e.status, e.message, e.code, e.param);
    }
    const model = b.model as string;
    if (!serving.router.models().includes(model)) return sendError(reply, 404, `the model '${model}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    const builder = new ResponseBuilder(model);
    const gone = clientGone(reply);
    if (b.stream !== true) {
      let done: Extract<ServeEvent, { type: 'done' }> | null = null;
      try {
        await run(model, sreq, (e) => (e.type === 'done' ? (done = e) : void builder.event(e)), gone.signal);
      } catch (err) {
        gone.finish();
        const e = errorStatus(err);
        return sendError(reply, e.status, e.message, e.code, e.param);
      }
      gone.finish();
      if (!done) return sendError(reply, 503, 'the instance ended the request without an answer', 'instance_failed');
      return builder.finish(done).response;
    }
    reply.hijack();
    const res = reply.raw;
    let started = false;
    const write = (events: { event: string; data: unknown }[]) => {
      if (!started) {
        started = true;
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
        for (const ev of builder.start()) res.write(`event: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`);
      }
      for (const ev of events) if (!res.writableEnded) res.write(`event: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`);
    };
    try {
      await run(model, sreq, (e) => write(e.type === 'done' ? builder.finish(e).events : builder.event(e)), gone.signal);
      gone.finish();
      res.end();
    } catch (err) {
      gone.finish();
      const e = errorStatus(err);
      if (!started) {
        res.writeHead(e.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(errorBody(e.status, e.message, e.code)));
        return;
      }
      res.write(`event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: 0, code: e.code, message: e.message, param: null })}\n\n`);
      res.end();
    }
  });
}
