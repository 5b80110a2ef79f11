/**
 * Anthropic Messages API on the daemon's port: POST /v1/messages (JSON or SSE) and
 * POST /v1/messages/count_tokens, with Anthropic's error shape. The API token is accepted as
 * `x-api-key` as well (server.ts), which is how Anthropic clients send it.
 */
import type { Logger } from 'pino';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { preparePrompt } from '../prompt/prepare.js';
import { AnthropicMessage, AnthropicStream, anthropicBodySchema, anthropicError, anthropicRequest, newMessageId } from '../dialects/anthropic.js';
import type { Serving } from '../serving/serving.js';
import { errorStatus, localTokenizer, namedEvents, runOn, runStreaming, runToEnd } from './dialect-support.js';
import { errorHeaders } from './errors.js';

function fail(reply: FastifyReply, status: number, message: string, code: string | null = null) {
  reply.headers(errorHeaders(status, code));
  return reply.code(status).send(anthropicError(status, message));
}

function parseBody(body: unknown) {
  const parsed = anthropicBodySchema.safeParse(body ?? {});
  if (parsed.success) return { body: parsed.data };
  const i = parsed.error.issues[0];
  return { error: `${i?.path.length ? `${i.path.join('.')}: ` : ''}${i?.message ?? 'invalid body'}` };
}

export function anthropicRoutes(app: FastifyInstance, serving: Serving, log?: Logger): void {
  const run = runOn(serving, log);
  app.post('/v1/messages', async (req, reply) => {
    const p = parseBody(req.body);
    if (!p.body) return fail(reply, 400, p.error!);
    const b = p.body;
    if (!serving.router.offers(b.model)) return fail(reply, 404, serving.catalog.unlisted(b.model) ?? `model: '${b.model}' does not exist in this pod`);
    let sreq;
    try {
      sreq = anthropicRequest(b);
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message);
    }
    const id = newMessageId();
    if (!b.stream) {
      const msg = new AnthropicMessage();
      const r = await runToEnd(run, b.model, sreq, reply, (e) => msg.add(e));
      return 'error' in r ? fail(reply, r.error.status, r.error.message, r.error.code) : msg.body(id, b.model, r.done);
    }
    const stream = new AnthropicStream(id, b.model);
    let opened = false;
    // message_start carries the prompt's token count: it waits for the 'start' event.
    const open = (promptTokens: number) => (opened ? '' : ((opened = true), namedEvents(stream.start(promptTokens))));
    await runStreaming(run, b.model, sreq, reply, {
      contentType: 'text/event-stream; charset=utf-8',
      frame: (e) => (e.type === 'start' ? open(e.promptTokens) : open(0) + namedEvents(e.type === 'done' ? stream.finish(e) : stream.event(e))),
      errorBody: (e) => anthropicError(e.status, e.message),
      midStreamError: (e) => namedEvents([{ event: 'error', data: anthropicError(e.status, e.message) }]),
    });
  });

  app.post('/v1/messages/count_tokens', async (req, reply) => {
    const p = parseBody({ max_tokens: 1, ...((req.body as object) ?? {}) });
    if (!p.body) return fail(reply, 400, p.error!);
    try {
      const tok = localTokenizer(serving, p.body.model);
      if (!tok) return fail(reply, 404, `model: '${p.body.model}' has no files on this node (count_tokens reads its tokenizer)`);
      const s = anthropicRequest(p.body);
      // The same prompt the request is billed for (the executor builds it with this function).
      return { input_tokens: preparePrompt(tok, p.body.model, s).ids.length };
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message, e.code);
    }
  });
}
