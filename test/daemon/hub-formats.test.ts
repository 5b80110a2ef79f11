/**
 * Issue 30's pod proofs against the stand-in hub, across network namespaces: two daemons and the hub
 * on its own host (counting the bytes it serves per repo and file).
 * - A Kimi-style repo (DeepSeek-V3 layout, a tiktoken.model vocabulary with its added tokens in
 *   tokenizer_config.json, no tokenizer.json) pulls, places as a 2-stage pipeline and chats; its
 *   completion equals `orchard run` on the hub's files (one process, unsplit).
 * - A GGUF MoE repo (Qwen3-MoE written by hfToGguf as llama.cpp lays it out) pulled by one node is
 *   split over both as 2 pipeline stages: the other node fetches the header and its stage's tensors
 *   by byte range from its peer, so the hub serves each byte of the file exactly once for the pod.
 * Skips without root / iproute2; ORCHARD_REQUIRE_NETNS_TESTS=1 makes that a failure.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { specialId, writeKimiDir, RANKS } from '../../packages/engine/test/tokenizer/kimi.js';
import { fetchedRecords, orchardRunOn, REPO_ROOT, startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, type TestHost, type TestNet } from '../harness/netns.js';

const HUB_PORT = 8089;
const KIMI = 'test-org/kimi-tiny';
const GGUF = 'test-org/qwen3moe-tiny-GGUF';
const GGUF_FILE = 'qwen3moe-tiny-F32.gguf';

let net: TestNet | undefined;
let hubHost: TestHost;
let daemons: TestDaemon[] = [];
const srcDirs: Record<string, string> = {};
const dataDirs: string[] = [];
const tmpRoots: string[] = [];
const tmp = (prefix: string) => {
  const d = mkdtempSync(join(os.tmpdir(), prefix));
  tmpRoots.push(d);
  return d;
};

const curl = (d: TestDaemon, method: string, path: string, body?: unknown, timeoutS = 150): { status: number; json: any } => {
  const args = ['-s', '-m', String(timeoutS), '-X', method, '-w', '\n%{http_code}', `http://127.0.0.1:${d.apiPort}${path}`];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(body));
  const out = d.host.exec('curl', args);
  const i = out.lastIndexOf('\n');
  return { status: Number(out.slice(i + 1)), json: out.slice(0, i) ? JSON.parse(out.slice(0, i)) : null };
};
const hubStats = (): { servedByRepo: Record<string, number> } => JSON.parse(hubHost.exec('curl', ['-sf', '-m', '5', `http://127.0.0.1:${HUB_PORT}/_stats`]));
const served = (repo: string, file: string) => hubStats().servedByRepo[`${repo}/${file}`] ?? 0;
const sizeOf = (repo: string, file: string) => statSync(join(srcDirs[repo], file)).size;

/**
 * Every daemon completes `prompt` with `orchard run`'s greedy text on `source` (the hub's files), and a
 * chat through the second daemon gets tokens; the chat's answer is returned for more checks.
 */
function servesAsRun(repo: string, source: string, prompt: string, chatContent: string): { status: number; json: any } {
  const want = orchardRunOn(source, prompt, 10);
  for (const d of daemons) {
    const r = curl(d, 'POST', '/v1/completions', { model: repo, prompt, max_tokens: 10, temperature: 0 });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json.choices[0].text).toBe(want);
  }
  const chat = curl(daemons[1], 'POST', '/v1/chat/completions', { model: repo, messages: [{ role: 'user', content: chatContent }], max_tokens: 6, temperature: 0 });
  expect(chat.status, JSON.stringify(chat.json)).toBe(200);
  expect(chat.json.usage.completion_tokens).toBeGreaterThan(0);
  return chat;
}

/** Kimi K2's layout in small: DeepSeek-V3 weights, a tiktoken vocabulary, Kimi's added tokens and template, no tokenizer.json. */
function writeKimiRepo(dir: string): void {
  const specials = 12;
  writeRandomModel(dir, { variant: 'deepseek-v3', numLayers: 4, extraVocab: RANKS + specials - 259, seed: 30, maxPositionEmbeddings: 256, dtype: 'bf16' });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) unlinkSync(join(dir, f));
  writeKimiDir(join(dir, '..'), dir.split('/').pop()!);
  // Kimi's own end of turn ends generation, as its generation_config says.
  const eos = specialId('<|im_end|>');
  for (const f of ['config.json', 'generation_config.json']) {
    const j = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    writeFileSync(join(dir, f), JSON.stringify({ ...j, eos_token_id: eos, bos_token_id: specialId('[BOS]') }));
  }
}

async function placePipeline(d: TestDaemon, repo: string): Promise<string> {
  const r = curl(d, 'POST', '/api/instances', { model: repo, strategy: 'pipeline', nodes: 2 });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  expect(new Set(r.json.instance.nodes).size).toBe(2);
  const id = r.json.instance.id;
  await waitFor(`instance ${id} ready`, () => curl(d, 'GET', '/api/instances').json.instances.find((x: any) => x.id === id)?.status?.ready, 180_000, 1000);
  return id;
}

describe.skipIf(!netnsAvailable())('hub formats on a 2-node pod (network namespaces)', () => {
  beforeAll(async () => {
    net = await createTestNet({ hosts: 3 });
    hubHost = net.hosts[2];
    srcDirs[KIMI] = join(tmp('orchard-hubfmt-kimi-'), 'kimi-tiny');
    mkdirSync(srcDirs[KIMI]);
    writeKimiRepo(srcDirs[KIMI]);
    srcDirs[GGUF] = tmp('orchard-hubfmt-gguf-');
    const hf = tmp('orchard-hubfmt-gguf-hf-');
    writeRandomModel(hf, { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 4, seed: 31, maxPositionEmbeddings: 256 });
    hfToGguf(hf, join(srcDirs[GGUF], GGUF_FILE), { dtype: 'f32' });
    const hub = hubHost.spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test/harness/fake-hub-main.ts'), String(HUB_PORT), `${KIMI}=${srcDirs[KIMI]}`, `${GGUF}=${srcDirs[GGUF]}`], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      hub.stdout!.once('data', () => resolve());
      hub.once('exit', (code) => reject(new Error(`fake hub exited ${code}`)));
    });
    const hubUrl = `http://${hubHost.ip}:${HUB_PORT}`;
    for (let i = 0; i < 2; i++) dataDirs.push(mkdtempSync(join(os.tmpdir(), `orchard-hubfmt-h${i}-`)));
    daemons = [0, 1].map((i) => startDaemon(net!.hosts[i], { dataDir: dataDirs[i], args: ['--gone-after', '20', '--name', `f${i}`], env: { HF_ENDPOINT: hubUrl, ORCHARD_LOG_LEVEL: 'info', ORCHARD_ENGINE_THREADS: '1' } }));
    await waitFor('2 daemons in every cluster view', () => daemons.every((d) => d.tryGet('/api/cluster')?.nodes.length === 2), 300_000).catch((err) => {
      for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').slice(-20).join('\n')}`);
      throw err;
    });
  }, 360_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').slice(-40).join('\n')}`);
  });

  afterAll(async () => {
    await net?.destroy();
    for (const d of [...tmpRoots, ...dataDirs]) rmSync(d, { recursive: true, force: true });
  });

  it('a Kimi-style tiktoken repo (no tokenizer.json) pulls, places over both nodes and chats', async () => {
    const pull = curl(daemons[0], 'POST', '/api/models/pull', { repo: KIMI });
    expect(pull.status, JSON.stringify(pull.json)).toBe(200);
    // The vocabulary came with the weights; the tokenizer's Python module did not (it is never run).
    expect(served(KIMI, 'tiktoken.model')).toBe(sizeOf(KIMI, 'tiktoken.model'));
    expect(served(KIMI, 'model.safetensors')).toBe(sizeOf(KIMI, 'model.safetensors'));
    const id = await placePipeline(daemons[0], KIMI);
    // A chat through Kimi's template: its turn markers are added tokens, one id each.
    const chat = servesAsRun(KIMI, srcDirs[KIMI], 'The quick brown fox', 'Hello there');
    expect(typeof chat.json.choices[0].message.content).toBe('string');
    // "<|im_user|>user<|im_middle|>Hello there<|im_end|><|im_assistant|>assistant<|im_middle|>" and a system turn the template adds:
    // far fewer ids than its characters, as only one id per marker can make it.
    expect(chat.json.usage.prompt_tokens).toBeLessThan(40);
    expect(curl(daemons[0], 'DELETE', `/api/instances/${id}`).status).toBe(204);
  }, 420_000);

  it('a GGUF MoE repo splits over both nodes, the hub serving each byte once for the pod', async () => {
    const pull = curl(daemons[0], 'POST', '/api/models/pull', { repo: GGUF });
    expect(pull.status, JSON.stringify(pull.json)).toBe(200);
    const size = sizeOf(GGUF, GGUF_FILE);
    // The check read the header's chunks, the pull the rest: each byte once.
    expect(served(GGUF, GGUF_FILE)).toBe(size);
    const id = await placePipeline(daemons[0], GGUF);
    // Nothing more from the hub: the other node's stage came over the cable, by its tensors' byte ranges.
    expect(served(GGUF, GGUF_FILE)).toBe(size);
    const [rec] = fetchedRecords(daemons[1], GGUF);
    expect(rec, 'the other node fetched its stage').toBeDefined();
    expect(rec.hubBytes).toBe(0);
    expect(rec.peerBytes).toBeGreaterThan(0);
    expect(rec.peerBytes).toBeLessThan(size);
    servesAsRun(GGUF, join(srcDirs[GGUF], GGUF_FILE), 'In the beginning', 'Hi');
    expect(curl(daemons[0], 'DELETE', `/api/instances/${id}`).status).toBe(204);
  }, 420_000);
});
