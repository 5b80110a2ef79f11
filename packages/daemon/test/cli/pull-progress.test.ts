/**
 * `orchard pull` as a person watches it: total, speed and time left per file and overall (exact lines
 * on a fake clock, and the real line on a throttled stand-in hub); network failures by their cause;
 * GGUF-only repos, by named quantisation or the best loadable file.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { formatBytes, formatDuration, PullProgress } from '../../src/cli/pull-progress.js';
import { pullWithProgress, splitModelRef } from '../../src/cli/commands/pull.js';
import { ggufQuant } from '../../src/store/gguf-pick.js';
import { startFakeHub } from '../../../../test/harness/fake-hub.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-pull-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function terminal() {
  let text = '';
  const stream = Object.assign(new Writable({ write: (c, _e, cb) => ((text += String(c)), cb()) }), { isTTY: true });
  return { stream, text: () => text };
}

async function withEnv<T>(env: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const old = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete process.env[k];
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(old)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

describe('the pull progress line', () => {
  it('says done/total, percent, speed and ETA for the file and for all files', () => {
    let t = 0;
    const p = new PullProgress(() => t);
    p.plan([
      { file: 'config.json', size: 700 },
      { file: 'model.safetensors', size: 4_000_000 },
    ]);
    p.update({ file: 'config.json', done: 700, total: 700, source: 'hub' });
    expect(p.line()).toMatchInlineSnapshot(`"config.json  700 B / 700 B  100%  –  ETA 0s  ·  all 700 B / 4.00 MB  0%  ETA ?"`);
    t = 1000;
    p.update({ file: 'model.safetensors', done: 0, total: 4_000_000, source: 'hub' });
    t = 3000;
    p.update({ file: 'model.safetensors', done: 1_000_000, total: 4_000_000, source: 'hub' });
    expect(p.line()).toMatchInlineSnapshot(`"model.safetensors  1.00 MB / 4.00 MB  25%  500 kB/s  ETA 6s  ·  all 1.00 MB / 4.00 MB  25%  ETA 9s"`);
    t = 4000;
    p.update({ file: 'model.safetensors', done: 4_000_000, total: 4_000_000, source: 'peer' });
    expect(p.line()).toMatch(/^model\.safetensors \(peer\) {2}4\.00 MB \/ 4\.00 MB {2}100% {2}1\.33 MB\/s {2}ETA 0s {2}· {2}all 4\.00 MB \/ 4\.00 MB {2}100% {2}ETA 0s$/);
  });

  it('writes sizes and durations for people', () => {
    expect([formatBytes(999), formatBytes(1500), formatBytes(3_444_864), formatBytes(1.2e9)]).toEqual(['999 B', '1.50 kB', '3.44 MB', '1.20 GB']);
    expect([formatDuration(null), formatDuration(42.4), formatDuration(185), formatDuration(3720)]).toEqual(['?', '42s', '3m05s', '1h02m']);
    expect(splitModelRef('org/name:Q4_K_M')).toEqual({ repo: 'org/name', quant: 'Q4_K_M' });
    expect(splitModelRef('org/name')).toEqual({ repo: 'org/name' });
  });

  it('on a throttled hub: the terminal line carries total, speed and ETA while bytes move', async () => {
    const src = join(work, 'src');
    writeRandomModel(src, { hiddenSize: 128, intermediateSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, seed: 3 });
    const hub = await startFakeHub({ 'test/slow': src }, { throttleBytesPerSecond: 400_000 });
    try {
      const term = terminal();
      const r = await withEnv({ HF_ENDPOINT: hub.url, HF_TOKEN: undefined }, () => pullWithProgress('test/slow', { dataDir: join(work, 'data'), progressTo: term.stream }));
      expect(r.hubBytes).toBeGreaterThan(500_000);
      const frames = term.text().split('\r\x1b[K').map((l) => l.trim());
      expect(frames[0]).toMatch(/^test\/slow: \d+ files, [\d.]+ [kM]B$/);
      const moving = frames.filter((l) => /^model\.safetensors {2}[\d.]+ kB \/ [\d.]+ [kM]B {2}\d+% {2}[\d.]+ kB\/s {2}ETA \d+s {2}· {2}all [\d.]+ [kM]B \/ [\d.]+ [kM]B {2}\d+% {2}ETA \d+s$/.test(l));
      expect(moving.length, term.text()).toBeGreaterThan(3);
      const percents = moving.map((l) => Number(/(\d+)%/.exec(l)![1]));
      expect(new Set(percents).size).toBeGreaterThan(2);
      expect(frames.at(-1)).toMatch(/all ([\d.]+ [kM]B) \/ \1 {2}100% {2}ETA 0s$/);
    } finally {
      await hub.close();
    }
  }, 60_000);
});

describe('pull errors say their cause', () => {
  const pull = (endpoint: string, ref: string, env: Record<string, string | undefined> = {}) =>
    withEnv({ HF_ENDPOINT: endpoint, HF_TOKEN: undefined, ...env }, () => pullWithProgress(ref, { dataDir: join(work, 'err'), quiet: true }));

  it('refused, DNS, 401 with and without a token, 404 with the repo name', async () => {
    const port = await new Promise<number>((r) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => r(p));
      });
    });
    await expect(pull(`http://127.0.0.1:${port}`, 'org/model')).rejects.toThrow(new RegExp(`org/model: cannot reach the hub at http://127.0.0.1:${port}: connection refused by 127.0.0.1:${port}`));
    await expect(pull('http://no-such-host.invalid', 'org/model')).rejects.toThrow(/cannot resolve no-such-host\.invalid \(DNS (ENOTFOUND|EAI_AGAIN)\)/);
    const src = join(work, 'src');
    const hub = await startFakeHub({ 'test/gated': src }, { token: 'right' });
    try {
      await expect(pull(hub.url, 'test/gated')).rejects.toThrow(/test\/gated: the hub refused the file listing \(HTTP 401\): the repo is gated or private \(set HF_TOKEN/);
      await expect(pull(hub.url, 'test/gated', { HF_TOKEN: 'wrong' })).rejects.toThrow(/HTTP 401\) although HF_TOKEN is set/);
      hub.faults.token = undefined;
      await expect(pull(hub.url, 'test/missing')).rejects.toThrow(/test\/missing: not found on http:\/\/127\.0\.0\.1:\d+ \(HTTP 404\): check the name/);
    } finally {
      await hub.close();
    }
  });
});

describe('GGUF-only repos', () => {
  it('reads the quantisation from file names', () => {
    expect(ggufQuant('Llama-3.2-1B-Instruct-Q4_K_M.gguf')).toBe('Q4_K_M');
    expect(ggufQuant('qwen2.5-0.5b-instruct-q8_0.gguf')).toBe('Q8_0');
    expect(ggufQuant('model-f16.gguf')).toBe('F16');
    expect(ggufQuant('model.gguf')).toBeNull();
  });

  it('pulls the named quantisation, else the largest file the engine loads, and says what exists when none fits', async () => {
    const dir = join(work, 'gguf-repo');
    mkdirSync(dir, { recursive: true });
    // One real GGUF (a pull checks its header first), written under three names and three sizes
    // (bytes after the tensor data are not read).
    writeRandomModel(join(work, 'gguf-src'), { numLayers: 1, hiddenSize: 32, intermediateSize: 64, seed: 2 });
    hfToGguf(join(work, 'gguf-src'), join(work, 'gguf-src', 'tiny.gguf'), { dtype: 'f32' });
    const gguf = readFileSync(join(work, 'gguf-src', 'tiny.gguf'));
    const S = gguf.length;
    writeFileSync(join(dir, 'tiny-Q4_K_M.gguf'), gguf);
    writeFileSync(join(dir, 'tiny-Q8_0.gguf'), Buffer.concat([gguf, Buffer.alloc(2000)]));
    writeFileSync(join(dir, 'tiny-F16.gguf'), Buffer.concat([gguf, Buffer.alloc(6000)]));
    writeFileSync(join(dir, 'README.md'), 'a GGUF repo');
    const hub = await startFakeHub({ 'test/tiny-GGUF': dir });
    try {
      const at = (d: string) => withEnv({ HF_ENDPOINT: hub.url, HF_TOKEN: undefined }, () => pullWithProgress('test/tiny-GGUF:Q4_K_M', { dataDir: join(work, d), quiet: true }));
      const named = await at('g1');
      expect(Object.keys(named.sources)).toEqual(['tiny-Q4_K_M.gguf']);
      expect(readFileSync(join(named.dir, 'tiny-Q4_K_M.gguf')).length).toBe(S);
      const { ModelStore, HubClient } = await import('../../src/store/index.js');
      const store = new ModelStore(join(work, 'g2'), new HubClient({ endpoint: hub.url }));
      expect(Object.keys((await store.pull('test/tiny-GGUF')).sources)).toEqual(['tiny-F16.gguf']);
      const small = new ModelStore(join(work, 'g3'), new HubClient({ endpoint: hub.url }));
      expect(Object.keys((await small.pull('test/tiny-GGUF', { budgetBytes: S + 3000 })).sources)).toEqual(['tiny-Q8_0.gguf']);
      await expect(small.pull('test/tiny-GGUF', { budgetBytes: 1000 })).rejects.toThrow(/no GGUF model the engine loads fits in 0\.0 GB \(the repo has F16 \(0\.00 GB\), Q4_K_M \(0\.00 GB\), Q8_0 \(0\.00 GB\)\); name one with test\/tiny-GGUF:QUANT/);
      await expect(small.pull('test/tiny-GGUF', { quant: 'Q2_K' })).rejects.toThrow(/no GGUF file for :Q2_K \(the repo has/);
    } finally {
      await hub.close();
    }
  });
});
