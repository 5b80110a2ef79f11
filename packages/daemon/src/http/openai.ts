/**
 * OpenAI-compatible endpoints: GET /v1/models, POST /v1/chat/completions and POST /v1/completions
 * (server-sent events with `stream: true`). A request becomes a ServeRequest and goes to the router;
 * its events become OpenAI's chunks. Every stream ends: `[DONE]` or an error event, then the end of
 * the response.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Serving } from '../serving/serving.js';
import { DialectError } from '../requests/errors.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { errorBody, sendError } from './errors.js';
import { chatCompletionSchema, completionSchema, describeIssue, type ChatCompletionBody, type CompletionBody } from './schemas.js';
import { ChatReply, chatDeltas, chatLogprob, completionLogprobs, openAiChatFields, openAiCompletionFields } from '../dialects/openai-chat.js';
import { openAiSampling } from '../dialects/sampling.js';
import { localTokenizer, runOn, runStreaming, runToEnd } from './dialect-support.js';
import { preparePrompt } from '../prompt/prepare.js';
import type { Logger } from 'pino';

type Kind = 'chat' | 'completion';
type Done = Extract<ServeEvent, { type: 'done' }>;

const now = () => Math.floor(Date.now() / 1000);

function toServeRequest(body: ChatCompletionBody | CompletionBody, kind: Kind): ServeRequest {
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  const base = {
    kind,
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed ?? randomInt(0, 2 ** 31),
    stop,
    ...(body.speculate ? { speculate: body.speculate } : {}),
    ...openAiSampling(body as Record<string, unknown>),
  };
  // Tools, response_format, logprobs and tool messages: dialects/openai-chat.ts (400s name the field).
  if (kind === 'chat') return { ...base, ...openAiChatFields(body as Record<string, unknown>) };
  const p = (body as CompletionBody).prompt;
  return { ...base, prompt: typeof p === 'string' ? p : p[0], ...openAiCompletionFields(body as Record<string, unknown>) };
}

/** An OpenAI chat body as a ServeRequest (the CLI's `orchard template` reads bodies this way too). */
export function chatServeRequest(body: ChatCompletionBody): ServeRequest {
  return toServeRequest(body, 'chat');
}

/** OpenAI's usage: prompt_tokens counts every prompt token; the ones the prefix cache held are also in cached_tokens. */
const usageOf = (d: Done) => ({
  prompt_tokens: d.promptTokens,
  completion_tokens: d.completionTokens,
  total_tokens: d.promptTokens + d.completionTokens,
  prompt_tokens_details: { cached_tokens: d.cachedPromptTokens ?? 0 },
});

export function openAiRoutes(app: FastifyInstance, serving: Serving, log?: Logger): void {
  const { router } = serving;
  // One log line per generation request (model, tokens, tok/s, TTFT, status).
  const run = runOn(serving, log);

  app.get('/v1/models', async () => ({
    object: 'list',
    data: router.models().map((id) => ({ id, object: 'model', created: 0, owned_by: 'orchard' })),
  }));

  const handle = (kind: Kind) => async (req: FastifyRequest, reply: FastifyReply) => {
    const schema = kind === 'chat' ? chatCompletionSchema : completionSchema;
    if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) return sendError(reply, 400, 'the body must be a JSON object', 'invalid_body');
    const parsed = schema.safeParse(req.body);
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    const body = parsed.data;
    if (!router.offers(body.model)) return sendError(reply, 404, serving.catalog.unlisted(body.model) ?? `the model '${body.model}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    let sreq: ServeRequest;
    try {
      sreq = toServeRequest(body, kind);
    } catch (err) {
      if (err instanceof DialectError) return sendError(reply, err.status, err.message, err.code, err.param);
      throw err;
    }
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`;
    const meta = { kind, id, created: now(), model: body.model };
    if (body.stream) return stream(reply, meta, sreq, !!body.stream_options?.include_usage);
    return answer(reply, meta, sreq);
  };

  async function answer(reply: FastifyReply, m: { kind: Kind; id: string; created: number; model: string }, sreq: ServeRequest) {
    const reply_ = new ChatReply();
    const r = await runToEnd(run, m.model, sreq, reply, (e) => reply_.add(e));
    if ('error' in r) return sendError(reply, r.error.status, r.error.message, r.error.code);
    const d = r.done;
    const logprobs = sreq.logprobs === undefined ? null : m.kind === 'chat' ? { content: reply_.tokens.map(chatLogprob) } : completionLogprobs(reply_.tokens);
    if (m.kind === 'chat') {
      return { id: m.id, object: 'chat.completion', created: m.created, model: m.model, choices: [{ index: 0, message: reply_.message(), logprobs, finish_reason: d.finishReason }], usage: usageOf(d), system_fingerprint: null };
    }
    return { id: m.id, object: 'text_completion', created: m.created, model: m.model, choices: [{ index: 0, text: reply_.content, logprobs, finish_reason: d.finishReason }], usage: usageOf(d) };
  }

  /** OpenAI's stream: `data:` chunks, a chat stream opening with the assistant's role, `[DONE]` after the last. */
  async function stream(reply: FastifyReply, m: { kind: Kind; id: string; created: number; model: string }, sreq: ServeRequest, includeUsage: boolean) {
    const chat = m.kind === 'chat';
    const data = (d: unknown) => `data: ${JSON.stringify(d)}\n\n`;
    const chunk = (delta: Record<string, unknown> | string, finishReason: string | null, logprobs: unknown = null) =>
      data(
        chat
          ? { id: m.id, object: 'chat.completion.chunk', created: m.created, model: m.model, system_fingerprint: null, choices: [{ index: 0, delta, logprobs, finish_reason: finishReason }] }
          : { id: m.id, object: 'text_completion', created: m.created, model: m.model, choices: [{ index: 0, text: delta as string, logprobs, finish_reason: finishReason }] },
      );
    await runStreaming(run, m.model, sreq, reply, {
      contentType: 'text/event-stream; charset=utf-8',
      opening: () => (chat ? chunk({ role: 'assistant', content: '' }, null) : ''),
      frame: (e) => {
        // Text, reasoning, tool_calls deltas (id, type, name first; then the arguments), logprobs.
        if (chat && e.type !== 'done') return (chatDeltas(e) ?? []).map((d) => chunk(d.delta, null, d.logprobs ?? null)).join('');
        if (e.type === 'text') return chunk(e.text, null);
        if (e.type === 'logprobs') return chunk('', null, completionLogprobs(e.tokens));
        if (e.type !== 'done') return '';
        const usage = includeUsage ? data({ id: m.id, object: chat ? 'chat.completion.chunk' : 'text_completion', created: m.created, model: m.model, choices: [], usage: usageOf(e) }) : '';
        return chunk(chat ? {} : '', e.finishReason) + usage + 'data: [DONE]\n\n';
      },
      errorBody: (e) => errorBody(e.status, e.message, e.code),
      // Mid-stream: an error event (the openai SDK raises it), then the end of the stream.
      midStreamError: (e) => data(errorBody(e.status, e.message, e.code)),
    });
  }

  app.post('/v1/chat/completions', handle('chat'));

  /**
   * What the model would see for a chat request (llama-server's /apply-template, with the tokens): the
   * prompt the executor builds from the same body — template, tools, reasoning switch — and its ids.
   * Nothing is generated. Reads the model's tokenizer on this node.
   */
  app.post('/apply-template', async (req, reply) => {
    const parsed = chatCompletionSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    const body = parsed.data;
    if (!router.offers(body.model)) return sendError(reply, 404, `the model '${body.model}' does not exist in this pod (see GET /v1/models)`, 'model_not_found', 'model');
    const tok = localTokenizer(serving, body.model);
    if (!tok) return sendError(reply, 404, `the model '${body.model}' has no files on this node (apply-template reads its tokenizer)`, 'model_not_local', 'model');
    try {
      const p = preparePrompt(tok, body.model, toServeRequest(body, 'chat'));
      return { model: body.model, prompt: p.text, tokens: p.ids, token_count: p.ids.length, tool_call_format: p.format };
    } catch (err) {
      if (err instanceof DialectError) return sendError(reply, err.status, err.message, err.code, err.param);
      throw err;
    }
  });
  app.post('/v1/completions', handle('completion'));
}
