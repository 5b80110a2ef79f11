/**
 * `orchard template`: the prompt and tokens a chat request becomes for a model, offline — the same
 * the daemon builds (and shows at POST /apply-template) — for a model directory with Qwen 2.5's
 * published template.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer } from '@orchard/engine';
import { familyModelOptions } from '../../../engine/test/fixtures/chat-templates/families.js';
import { writeRandomModel } from '@orchard/engine/testing';
import { preparePrompt } from '../../src/prompt/prepare.js';
import { runCli } from '../serve/in-process-pod.js';

let dir: string;
let model: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-template-cli-'));
  model = join(dir, 'qwen');
  writeRandomModel(model, familyModelOptions('qwen25', { seed: 3 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('orchard template', () => {
  it('a message: the rendered prompt and its token count', async () => {
    const r = await runCli(['template', 'Hello there', '--model', model]);
    expect(r.code, r.stderr).toBe(0);
    const want = preparePrompt(loadTokenizer(model), 'qwen', { kind: 'chat', messages: [{ role: 'user', content: 'Hello there' }], temperature: 1, topP: 1, seed: 0, stop: [] });
    expect(r.stdout).toBe(`${want.text}-- ${want.ids.length} tokens, tool calls in the hermes format\n`);
  }, 60_000);

  it('a request body with tools, as JSON: prompt, tokens and the tool-call format', async () => {
    const body = { messages: [{ role: 'user', content: 'Weather?' }], tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }] };
    const file = join(dir, 'req.json');
    writeFileSync(file, JSON.stringify(body));
    const r = await runCli(['template', '--model', model, '--request', file, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.tool_call_format).toBe('hermes');
    expect(out.prompt).toContain('"name": "get_weather"');
    expect(out.tokens).toEqual(loadTokenizer(model).encode(out.prompt, { addSpecialTokens: false }));
    expect(out.token_count).toBe(out.tokens.length);
  }, 60_000);

  it('what the model cannot take is an error naming it', async () => {
    const r = await runCli(['template', 'hi', '--model', model, '--request', '-'], '{}');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/MESSAGE or --request/);
    const bad = await runCli(['template', '--model', model, '--request', '-'], JSON.stringify({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high' }));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/does not support thinking/);
  }, 60_000);
});
