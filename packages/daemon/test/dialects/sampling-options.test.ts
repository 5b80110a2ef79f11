/**
 * Each dialect's sampling names reach the ServeRequest: OpenAI's penalties and logit_bias (and
 * llama-server's extra names), every option ollama-js can send (its own Options interface, read from
 * the installed package, with Ollama's documented defaults), Anthropic's and the Responses API's
 * reasoning switches. What cannot be honoured is a 400 naming the field.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serveRequestSchema } from '../../src/requests/request.js';
import { openAiSampling, ollamaSampling, anthropicReasoning, responsesReasoning } from '../../src/dialects/sampling.js';
import { ollamaChatRequest, ollamaChatSchema, ollamaGenerateRequest, ollamaGenerateSchema } from '../../src/dialects/ollama.js';
import { anthropicBodySchema, anthropicRequest } from '../../src/dialects/anthropic.js';
import { responsesRequest } from '../../src/dialects/responses.js';
import { DialectError } from '../../src/requests/errors.js';

/** Ollama's documented defaults (docs/modelfile.md, api/types.go DefaultOptions) for every option ollama-js types. */
const OLLAMA_DEFAULTS: Record<string, unknown> = {
  numa: false, num_ctx: 2048, num_batch: 512, num_gpu: -1, main_gpu: 0, low_vram: false, f16_kv: true, logits_all: false, vocab_only: false,
  use_mmap: true, use_mlock: false, embedding_only: false, num_thread: 0, num_keep: 4, seed: -1, num_predict: -1, top_k: 40, top_p: 0.9,
  min_p: 0, tfs_z: 1, typical_p: 1, repeat_last_n: 64, temperature: 0.8, repeat_penalty: 1.1, presence_penalty: 0, frequency_penalty: 0,
  mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, penalize_newline: true, stop: [],
};

/** The option names of ollama-js's `Options` interface, from the installed package's type declarations. */
function ollamaJsOptionNames(): string[] {
  const require = createRequire(import.meta.url);
  const dts = readFileSync(join(dirname(require.resolve('ollama')), 'browser.d.ts'), 'utf8');
  const body = /interface Options \{([^}]*)\}/.exec(dts)?.[1];
  if (!body) throw new Error('ollama-js no longer declares `interface Options` in dist/browser.d.ts');
  return [...body.matchAll(/^\s*(\w+)\??:/gm)].map((m) => m[1]);
}

const chat = (options: Record<string, unknown>, extra: Record<string, unknown> = {}) => ollamaChatRequest(ollamaChatSchema.parse({ model: 'm', messages: [{ role: 'user', content: 'hi' }], options, ...extra }));

describe('Ollama options', () => {
  it('every option ollama-js sends, at Ollama’s defaults, is accepted and the sampling ones are honoured', () => {
    const names = ollamaJsOptionNames();
    expect(names.length).toBeGreaterThan(20);
    const missing = names.filter((n) => !(n in OLLAMA_DEFAULTS));
    expect(missing, 'ollama-js options without a documented default here').toEqual([]);
    const req = chat(Object.fromEntries(names.map((n) => [n, OLLAMA_DEFAULTS[n]])));
    expect(req).toMatchObject({ temperature: 0.8, topP: 0.9, topK: 40, minP: 0, typicalP: 1, repeatPenalty: 1.1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0 });
    // seed -1 is Ollama's "random": a fresh seed, not -1.
    expect(req.seed).toBeGreaterThanOrEqual(0);
    expect(serveRequestSchema.parse(req)).toMatchObject({ repeatPenalty: 1.1 });
  });

  it('repeat_last_n -1 is the whole context; 0 turns the penalties off', () => {
    expect(chat({ repeat_penalty: 1.2, repeat_last_n: -1 }).repeatLastN).toBe(2 ** 31 - 1);
    expect(chat({ repeat_last_n: 0 }).repeatLastN).toBe(0);
  });

  it('what cannot be honoured is a 400 naming the option', () => {
    expect(() => chat({ mirostat: 2 })).toThrow(/^options\.mirostat: mirostat 2 sampling is not implemented/);
    expect(() => chat({ tfs_z: 0.9 })).toThrow(/^options\.tfs_z:/);
    expect(() => chat({ repeat_penalty: -1 })).toThrow(DialectError);
    expect(() => chat({ repeat_penalty: -1 })).toThrow(/^options\.repeat_penalty:/);
  });

  it('think switches reasoning (chat and generate), an effort for gpt-oss, anything else is a 400', () => {
    expect(chat({}, { think: false }).reasoning).toBe(false);
    expect(chat({}, { think: true }).reasoning).toBe(true);
    expect(chat({}, { think: 'high' }).reasoning).toBe('high');
    expect(chat({}).reasoning).toBeUndefined();
    expect(() => chat({}, { think: 'very' })).toThrow(/^think:/);
    expect(ollamaGenerateRequest(ollamaGenerateSchema.parse({ model: 'm', prompt: 'x', think: false })).reasoning).toBe(false);
  });

  it('an assistant turn’s thinking goes back as its reasoning', () => {
    const req = ollamaChatRequest(ollamaChatSchema.parse({ model: 'm', messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a', thinking: 'because' }, { role: 'user', content: 'q2' }] }));
    expect(req.messages![1]).toMatchObject({ role: 'assistant', content: 'a', reasoning_content: 'because' });
  });
});

describe('OpenAI', () => {
  it('frequency_penalty, presence_penalty and logit_bias are honoured, not dropped', () => {
    expect(openAiSampling({ frequency_penalty: 0.5, presence_penalty: -0.25, logit_bias: { '50256': -100, '11': 3 } })).toEqual({ frequencyPenalty: 0.5, presencePenalty: -0.25, logitBias: { '50256': -100, '11': 3 } });
  });

  it('llama-server’s extra names (top_k, min_p, typical_p, repeat_penalty, repeat_last_n) map too', () => {
    expect(openAiSampling({ top_k: 20, min_p: 0.05, typical_p: 0.9, repeat_penalty: 1.15, repeat_last_n: 128 })).toEqual({ topK: 20, minP: 0.05, typicalP: 0.9, repeatPenalty: 1.15, repeatLastN: 128 });
  });

  it('nulls (as the OpenAI SDKs send unset fields) are absent', () => {
    expect(openAiSampling({ frequency_penalty: null, logit_bias: null, presence_penalty: null })).toEqual({});
  });

  it('out-of-range values are a 400 naming the field', () => {
    expect(() => openAiSampling({ frequency_penalty: 3 })).toThrow(/^frequency_penalty:/);
    expect(() => openAiSampling({ logit_bias: { abc: 1 } })).toThrow(/^logit_bias\.abc:/);
    expect(() => openAiSampling({ logit_bias: { '1': 500 } })).toThrow(/^logit_bias\.1:/);
  });

  it('reasoning_effort and chat_template_kwargs.enable_thinking switch reasoning', () => {
    expect(openAiSampling({ reasoning_effort: 'medium' })).toEqual({ reasoning: 'medium' });
    expect(openAiSampling({ chat_template_kwargs: { enable_thinking: false } })).toEqual({ reasoning: false });
    expect(openAiSampling({ chat_template_kwargs: { enable_thinking: true } })).toEqual({ reasoning: true });
  });
});

describe('Anthropic and Responses', () => {
  it('Anthropic thinking on and off; thinking blocks in history go back as the turn’s reasoning', () => {
    expect(anthropicReasoning({ type: 'enabled', budget_tokens: 1024 })).toEqual({ reasoning: true });
    expect(anthropicReasoning({ type: 'disabled' })).toEqual({ reasoning: false });
    expect(() => anthropicReasoning({ type: 'sometimes' })).toThrow(/^thinking\.type:/);
    const req = anthropicRequest(
      anthropicBodySchema.parse({
        model: 'm',
        max_tokens: 10,
        thinking: { type: 'enabled', budget_tokens: 100 },
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'let me see', signature: 'x' }, { type: 'tool_use', id: 't1', name: 'f', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
        ],
      }),
    );
    expect(req.reasoning).toBe(true);
    expect(req.messages![1]).toMatchObject({ role: 'assistant', reasoning_content: 'let me see', tool_calls: [{ id: 't1' }] });
  });

  it('Responses reasoning.effort, and reasoning items go back with the next assistant turn', () => {
    expect(responsesReasoning({ effort: 'none' })).toEqual({ reasoning: false });
    expect(responsesReasoning({ effort: 'minimal' })).toEqual({ reasoning: 'low' });
    const req = responsesRequest({
      model: 'm',
      reasoning: { effort: 'high' },
      input: [
        { role: 'user', content: 'q' },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'think first' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      ],
    });
    expect(req.reasoning).toBe('high');
    expect(req.messages![1]).toMatchObject({ role: 'assistant', reasoning_content: 'think first', tool_calls: [{ id: 'c1' }] });
  });
});
