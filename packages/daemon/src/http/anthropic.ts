/**
 * Anthropic Messages API on the daemon's port: POST /v1/messages (JSON or SSE) and
 * POST /v1/messages/count_tokens, with Anthropic's error shape. The API token is accepted as
 * `x-api-key` as well (server.ts), which is how Anthropic clients send it.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { planChat } from '../dialects/tools/plan.js';
import { AnthropicMessage, AnthropicStream, anthropicBodySchema, anthropicError, anthropicRequest, newMessageId } from '../dialects/anthropic.js';
import type { Serving } from '../serving/serving.js';
import type { ServeEvent } from '../serving/requests.js';
import { clientGone, errorStatus, localTokenizer, runOn } from './dialect-support.js';

function fail(reply: FastifyReply, status: number, message: string) {
  if (status === 429 || status === 503) reply.header('retry-after', '1');
  return reply.code(status).send(anthropicError(status, message));
}

function parseBody(body: unknown) {
  const parsed = anthropicBodySchema.safeParse(body ?? {});
  if (parsed.success) return { body: parsed.data };
  const i = parsed.error.issues[0];
  return { error: `${i?.path.length ? `${i.path.join('.')}: ` : ''}${i?.message ?? 'invalid body'}` };
}

export function anthropicRoutes(app: FastifyInstance, serving: Serving): void {
  const run = runOn(serving);
  app.post('/v1/messages', async (req, reply) => {
    const p = parseBody(req.body);
    if (!p.body) return fail(reply, 400, p.error!);
    const b = p.body;
    if (!serving.router.models().includes(b.model)) return fail(reply, 404, `model: '${b.model}' does not exist in this pod`);
    let sreq;
    try {
      sreq = anthropicRequest(b);
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message);
    }
    const id = newMessageId();
    const gone = clientGone(reply);
    if (!b.stream) {
      const msg = new AnthropicMessage();
      let done: Extract<ServeEvent, { type: 'done' }> | null = null;
      try {
        await run(b.model, sreq, (e) => (e.type === 'done' ? (done = e) : msg.add(e)), gone.signal);
      } catch (err) {
        gone.finish();
        const e = errorStatus(err);
        return fail(reply, e.status, e.message);
      }
      gone.finish();
      if (!done) return fail(reply, 503, 'the instance ended the request without an answer');
      return msg.body(id, b.model, done);
    }
    reply.hijack();
    const res = reply.raw;
    const stream = new AnthropicStream(id, b.model);
    let started = false;
    const write = (events: { event: string; data: unknown }[]) => {
      for (const ev of events) if (!res.writableEnded) res.write(`event: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`);
    };
    const begin = (promptTokens: number) => {
      if (started) return;
      started = true;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      write(stream.start(promptTokens));
    };
    try {
      await run(
        b.model,
        sreq,
        (e) => {
          if (e.type === 'start') return begin(e.promptTokens);
          begin(0);
          write(e.type === 'done' ? stream.finish(e) : stream.event(e));
        },
        gone.signal,
      );
      gone.finish();
      res.end();
    } catch (err) {
      gone.finish();
      const e = errorStatus(err);
      if (!started) {
        res.writeHead(e.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(anthropicError(e.status, e.message)));
        return;
      }
      write([{ event: 'error', data: anthropicError(e.status, e.message) }]);
      res.end();
    }
  });

  app.post('/v1/messages/count_tokens', async (req, reply) => {
    const p = parseBody({ max_tokens: 1, ...((req.body as object) ?? {}) });
    if (!p.body) return fail(reply, 400, p.error!);
    const tok = localTokenizer(serving, p.body.model);
    if (!tok) return fail(reply, 404, `model: '${p.body.model}' has no files on this node (count_tokens reads its tokenizer)`);
    try {
      const s = anthropicRequest(p.body);
      const text = tok.chatTemplate ? planChat(tok, p.body.model, { messages: s.messages ?? [], tools: s.tools, toolChoice: s.toolChoice }).prompt : (s.messages ?? []).map((m: { content: string | null }) => m.content ?? '').join('\n');
      return { input_tokens: tok.encode(text, { addSpecialTokens: !tok.chatTemplate }).length };
    } catch (err) {
      const e = errorStatus(err);
      return fail(reply, e.status, e.message);
    }
  });
}
