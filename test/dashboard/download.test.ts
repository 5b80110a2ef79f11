/**
 * Download and load progress in the page: one daemon (this machine's loopback) pulls a model from a
 * local stand-in for the hub behind a throttling proxy (so the download takes seconds); the page's
 * Download form starts it, a progress bar shows the bytes and percentage growing, the result says
 * where the bytes came from, and the model then loads with the Load button. Skips without Chromium
 * unless ORCHARD_REQUIRE_BROWSER_TESTS=1.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeAwqModel, writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../harness/fake-hub.js';
import { startLoopbackDaemon } from '../harness/daemons.js';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

const missing = browserMissing();
const REPO = 'test-org/dash-dl';
/** The catalog's repo for the short name `qwen2.5-0.5b` (models/catalog.json), served here by a tiny stand-in. */
const SHORT = 'qwen2.5-0.5b';
const SHORT_REPO = 'Qwen/Qwen2.5-0.5B-Instruct';
/** A config.json alone, of a model far larger than this machine (planned from its dimensions). */
const TOO_BIG = 'test-org/too-big';
/** AWQ weights: the engine refuses the method, so the plan says so and nothing is pulled. */
const AWQ = 'test-org/awq';
/** Bytes per second the proxy lets through. */
const RATE = 4 * 2 ** 20;

/** An HTTP proxy to `target` that paces response bodies at RATE. */
function throttlingProxy(target: string): Promise<Server & { url: string }> {
  const t = new URL(target);
  // One rate for all connections together: the pull reads a file in parallel range requests.
  let free = Date.now();
  const server = createServer((req, res) => {
    const up = request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: { ...req.headers, host: t.host } }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.on('data', (chunk: Buffer) => {
        upRes.pause();
        res.write(chunk);
        free = Math.max(free, Date.now()) + (chunk.length / RATE) * 1000;
        setTimeout(() => upRes.resume(), free - Date.now());
      });
      upRes.on('end', () => res.end());
      upRes.on('error', () => res.destroy());
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(Object.assign(server, { url: `http://127.0.0.1:${(server.address() as { port: number }).port}` }))));
}

let hub: FakeHub | undefined;
let proxy: (Server & { url: string }) | undefined;
let daemon: ChildProcess | undefined;
let browser: Browser | undefined;
const dirs: string[] = [];
let base = '';

describe.skipIf(!!missing && !REQUIRE_BROWSER)('dashboard download and load progress', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    const src = mkdtempSync(join(os.tmpdir(), 'orchard-dash-src-'));
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-dash-dl-'));
    dirs.push(src, dataDir);
    // About 24 MB of f32 weights: several seconds through the proxy.
    writeRandomModel(src, { numLayers: 4, hiddenSize: 384, intermediateSize: 1024, numHeads: 6, numKvHeads: 2, maxPositionEmbeddings: 256, seed: 9 });
    const tiny = mkdtempSync(join(os.tmpdir(), 'orchard-dash-tiny-'));
    dirs.push(tiny);
    writeRandomModel(tiny, { numLayers: 2, hiddenSize: 64, intermediateSize: 128, numHeads: 4, numKvHeads: 2, seed: 4 });
    const big = mkdtempSync(join(os.tmpdir(), 'orchard-dash-big-'));
    const awq = join(mkdtempSync(join(os.tmpdir(), 'orchard-dash-awq-')), 'awq');
    dirs.push(big, join(awq, '..'));
    const config = JSON.parse(readFileSync(join(tiny, 'config.json'), 'utf8'));
    writeFileSync(join(big, 'config.json'), JSON.stringify({ ...config, hidden_size: 32768, intermediate_size: 106496, num_hidden_layers: 200, num_attention_heads: 256, num_key_value_heads: 8, vocab_size: 128256, torch_dtype: 'bfloat16' }));
    writeAwqModel(tiny, awq);
    hub = await startFakeHub({ [REPO]: src, [SHORT_REPO]: tiny, [TOO_BIG]: big, [AWQ]: awq });
    proxy = await throttlingProxy(hub.url);
    const d = await startLoopbackDaemon(dataDir, { args: ['--name', 'fetcher'], env: { HF_ENDPOINT: proxy.url, ORCHARD_LOG_LEVEL: 'info' } });
    daemon = d.child;
    base = d.base;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close().catch(() => {});
    daemon?.kill('SIGKILL');
    proxy?.close();
    await hub?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('the Download form shows a growing progress bar, then the model loads', async () => {
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(30_000);
    await page.goto(`${base}/`);
    await page.locator('svg[data-testid=topology] g.node').waitFor();
    expect(await page.locator(`form.load-form select[name=model] option[value="${REPO}"]`).count()).toBe(0);
    await page.fill('form.pull-form input[name=repo]', REPO);
    await page.click('form.pull-form button[type=submit]');
    // The pod's plan first (from the hub's small files and headers): it fits, on this one node.
    const plan = page.locator('[data-testid=pull-plan]');
    await plan.waitFor();
    expect(await plan.getAttribute('data-fits')).toBe('true');
    expect(await page.locator('[data-testid=pull-plan-verdict]').textContent()).toMatch(new RegExp(`^${REPO} \\([\\d.]+ MiB of weights\\) fits on 1 node \\(\\w+\\), [\\d.]+ tok/s predicted$`));
    expect(await page.locator('[data-testid=pull-plan-node]').allTextContents()).toEqual([expect.stringMatching(/^fetcher: [\d.]+ MiB of weights, [\d.]+ [MG]iB in all of [\d.]+ GiB free$/)]);
    const bar = page.locator('[data-testid=progress]').first();
    await bar.waitFor({ timeout: 30_000 });
    // Percentages per file: a small file (config.json) may show 100% before the weights start.
    const byFile = new Map<string, number[]>();
    const most = () => [...byFile.values()].reduce((a, b) => (b.length > a.length ? b : a), [] as number[]);
    for (let i = 0; i < 40 && most().length < 4; i++) {
      const text = (await bar.textContent().catch(() => '')) ?? '';
      const m = /downloading (\S*) .*\((\d+)%\)/.exec(text);
      if (m) {
        const seen = byFile.get(m[1]) ?? [];
        if (Number(m[2]) !== seen.at(-1)) byFile.set(m[1], [...seen, Number(m[2])]);
      }
      if (most().length === 2) await screenshot(page, '7-download-progress');
      await page.waitForTimeout(400);
    }
    // The page followed the download: at least three different percentages of one file, rising.
    // The check before the pull reads the weights' header first (that file may show 100% then); from
    // the last fall on, the percentages are the download's.
    const all = most();
    const fall = all.findLastIndex((p, i) => i > 0 && p < all[i - 1]);
    const seen = fall < 0 ? all : all.slice(fall);
    expect(seen.length, JSON.stringify([...byFile])).toBeGreaterThanOrEqual(3);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
    const result = page.locator('[data-testid=pull-result]');
    await result.waitFor({ timeout: 120_000 });
    expect(await result.textContent()).toMatch(new RegExp(`^${REPO} is on this node: \\d+(\\.\\d)? MiB from the hub, 0 B from peers$`));
    await expect.poll(() => page.locator('[data-testid=progress]').count(), { timeout: 10_000 }).toBe(0);

    await expect.poll(() => page.locator(`form.load-form select[name=model] option`).allTextContents(), { timeout: 15_000 }).toContain(REPO);
    await page.selectOption('form.load-form select[name=model]', REPO);
    await page.selectOption('form.load-form select[name=strategy]', 'auto');
    await page.click('form.load-form button[type=submit]');
    const inst = page.locator(`.instance[data-model="${REPO}"]`);
    await inst.waitFor();
    await expect.poll(() => inst.locator('[data-testid=instance-state]').textContent(), { timeout: 120_000, interval: 1000 }).toBe('ready');
    expect(await inst.locator('[data-placement-node=fetcher]').count()).toBe(1);
    await screenshot(page, '8-downloaded-and-loaded');
  }, 240_000);

  it('the Download box takes the short names the CLI takes, and says which repo it fetched', async () => {
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(30_000);
    await page.goto(`${base}/`);
    await page.locator('svg[data-testid=topology] g.node').waitFor();
    await page.fill('form.pull-form input[name=repo]', SHORT);
    await page.click('form.pull-form button[type=submit]');
    const result = page.locator('[data-testid=pull-result]');
    await result.waitFor({ timeout: 60_000 });
    expect(await result.getAttribute('class')).toBe('muted');
    expect(await result.textContent()).toMatch(/^Qwen\/Qwen2\.5-0\.5B-Instruct is on this node: [\d.]+ [KM]iB from the hub, 0 B from peers$/);
    expect(hub!.requests.some((r) => r.startsWith(`GET /api/models/${SHORT_REPO}/revision/`))).toBe(true);
  }, 120_000);

  it('before a pull, the plan says a model does not fit (pulled only when asked again) or cannot be loaded (not pulled)', async () => {
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(30_000);
    await page.goto(`${base}/`);
    await page.locator('svg[data-testid=topology] g.node').waitFor();
    const plan = page.locator('[data-testid=pull-plan]');
    const button = page.locator('form.pull-form button[type=submit]');

    await page.fill('form.pull-form input[name=repo]', TOO_BIG);
    await button.click();
    await plan.waitFor();
    expect(await plan.getAttribute('data-fits')).toBe('false');
    expect(await page.locator('[data-testid=pull-plan-verdict]').textContent()).toMatch(new RegExp(`^${TOO_BIG} \\([\\d.]+ [GT]iB of weights\\) does not fit this pod: .+`));
    await expect.poll(() => button.textContent()).toBe('Download anyway');
    expect(await page.locator('[data-testid=pull-result]').count()).toBe(0);
    await screenshot(page, '9-pull-plan-does-not-fit');

    await page.fill('form.pull-form input[name=repo]', AWQ);
    await expect.poll(() => button.textContent()).toBe('Download');
    await button.click();
    await expect.poll(() => plan.getAttribute('data-loadable')).toBe('false');
    expect(await page.locator('[data-testid=pull-plan-verdict]').textContent()).toMatch(new RegExp(`^${AWQ} cannot be loaded: .*awq`));
    await page.waitForTimeout(500);
    expect(await page.locator('[data-testid=pull-result]').count()).toBe(0);
    // Nothing but the small files and the weights' headers left the hub for either.
    for (const [key, n] of hub!.servedByRepo) {
      if (!key.startsWith(`${AWQ}/`) || !key.endsWith('.safetensors')) continue;
      expect(n, key).toBeLessThan(statSync(join(dirs.find((d) => d.includes('orchard-dash-awq-'))!, 'awq', key.slice(AWQ.length + 1))).size / 4);
    }
    expect([...hub!.servedByRepo.keys()].filter((k) => k.startsWith(`${TOO_BIG}/`))).toEqual([`${TOO_BIG}/config.json`]);
  }, 120_000);
});
