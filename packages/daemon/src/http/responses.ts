/**
 * The OpenAI routes beyond chat and completions: POST /v1/responses (the Responses API, JSON or SSE),
 * GET /v1/models/{id}, and POST /v1/embeddings (serving/embedder.ts), with OpenAI's error shape.
 */
import type { Logger } from 'pino';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Serving } from '../serving/serving.js';
import { ResponseBuilder, responsesRequest } from '../dialects/responses.js';
import { openAiEmbedRequest, openAiEmbeddings, shaped } from '../dialects/embeddings.js';
import { errorStatus, namedEvents, runOn, runStreaming, runToEnd } from './dialect-support.js';
import { errorBody, sendError } from './errors.js';

export function responsesRoutes(app: FastifyInstance, serving: Serving, log?: Logger): void {
  const run = runOn(serving, log);
  app.post('/v1/embeddings', async (req, reply) => {
    const b = req.body;
    if (b === null || typeof b !== 'object' || Array.isArray(b)) return sendError(reply, 400, 'the body must be a JSON object', 'invalid_body');
    try {
      const r = openAiEmbedRequest(b as Record<string, unknown>);
      const out = await serving.embedder.embed(r.model, r.inputs, r.truncate);
      const format = (b as { encoding_format?: 'float' | 'base64' }).encoding_format ?? 'float';
      return openAiEmbeddings(r.model, shaped(out.vectors, r.dimensions), out.promptTokens, format);
    } catch (err) {
      const e = errorStatus(err);
      return sendError(reply, e.status, e.message, e.code, e.param);
    }
  });

  // Model ids contain a slash (org/name): the wildcard takes the rest of the path.
  app.get('/v1/models/*', async (req, reply) => {
    const id = decodeURIComponent((req.params as { '*': string })['*']);
    if (!serving.router.offers(id)) return sendError(reply, 404, serving.catalog.unlisted(id) ?? `the model '${id}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
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
    if (!serving.router.offers(model)) return sendError(reply, 404, serving.catalog.unlisted(model) ?? `the model '${model}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    const builder = new ResponseBuilder(model);
    if (b.stream !== true) {
      const r = await runToEnd(run, model, sreq, reply, (e) => void builder.event(e));
      return 'error' in r ? sendError(reply, r.error.status, r.error.message, r.error.code, r.error.param) : builder.finish(r.done).response;
    }
    await runStreaming(run, model, sreq, reply, {
      contentType: 'text/event-stream; charset=utf-8',
      opening: () => namedEvents(builder.start()),
      frame: (e) => namedEvents(e.type === 'done' ? builder.finish(e).events : builder.event(e)),
      errorBody: (e) => errorBody(e.status, e.message, e.code),
      midStreamError: (e) => namedEvents([{ event: 'error', data: { type: 'error', sequence_number: 0, code: e.code, message: e.message, param: null } }]),
    });
  });
}
