/**
 * The dashboard in a real browser against a 3-daemon pod in network namespaces: every node and
 * every measured link shows; a model loaded with the page's Load button shows which node holds which
 * layers, with predicted and (after a chat) measured tokens/s; a chat reply streams into the page
 * piece by piece and the Stop button ends one; a killed node disappears from the view.
 * Screenshots: test-artifacts/dashboard/*.png.
 *
 * Needs root + iproute2 (namespaces) and Chromium; skips with the reason otherwise
 * (ORCHARD_REQUIRE_BROWSER_TESTS=1 turns a missing Chromium into a failure).
 */
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { REPO_ROOT, startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, type TestNet } from '../harness/netns.js';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

// Page-side code (inside page.evaluate) runs in the browser; the workspace's type config has no DOM lib.
declare const document: any, window: any, MutationObserver: any;

const USE_DEMO = existsSync(join(REPO_ROOT, 'models/orchard-demo/config.json'));
const MODEL = USE_DEMO ? 'orchard-demo' : 'test/dash-llama';
const missing = browserMissing();
const skip = !netnsAvailable() || (!!missing && !REQUIRE_BROWSER);
if (missing) console.warn(`dashboard browser tests: ${missing}${REQUIRE_BROWSER ? '' : ' — skipped'}`);

let net: TestNet | undefined;
let daemons: TestDaemon[] = [];
let browser: Browser | undefined;
let page: Page;
const names = ['apple', 'pear', 'quince'];

const nodeNames = (p: Page) => p.$$eval('svg[data-testid=topology] g.node', (els) => els.map((e) => e.getAttribute('data-node')).sort());

describe.skipIf(skip)('dashboard in Chromium on a 3-daemon pod', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    net = await createTestNet({ hosts: 3 });
    daemons = net.hosts.map((h, i) => {
      const dataDir = mkdtempSync(join(os.tmpdir(), `orchard-dash-${h.ns}-`));
      if (!USE_DEMO) {
        const dir = join(dataDir, 'models', ...MODEL.split('/'));
        mkdirSync(dir, { recursive: true });
        writeRandomModel(dir, { numLayers: 4, hiddenSize: 128, intermediateSize: 256, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 128, seed: 5 });
      }
      return startDaemon(h, { dataDir, args: ['--gone-after', '3', '--name', names[i]], env: { ORCHARD_LOG_LEVEL: 'info' } });
    });
    await waitFor('3 nodes and 3 measured links in the cluster view', () => daemons.every((d) => d.tryGet('/api/cluster')?.links.length === 3 && d.tryGet('/api/cluster')?.nodes.length === 3), 90_000);
    browser = await launchBrowser({ netns: net.hosts[0].ns });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.setDefaultTimeout(30_000);
  }, 150_000);

  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail' && page) await screenshot(page, `failed-${ctx.task.name.replace(/\W+/g, '-').slice(0, 60)}`).catch(() => {});
    if (ctx.task.result?.state === 'fail') for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').slice(-25).join('\n')}`);
  });

  afterAll(async () => {
    await browser?.close().catch(() => {});
    await net?.destroy();
  });

  it('shows every node (chip, memory, GPU cores, load) and every link with its kind, latency and bandwidth', async () => {
    await page.goto('http://127.0.0.1:52415/');
    await page.waitForFunction(() => document.querySelectorAll('svg[data-testid=topology] g.node').length === 3 && document.querySelectorAll('svg[data-testid=topology] g.link').length === 3);
    expect(await nodeNames(page)).toEqual([...names].sort());
    await expect.poll(() => page.textContent('[data-testid=connection]')).toBe('live');
    const api = daemons[0].get('/api/cluster');
    const byId = new Map<string, string>(api.nodes.map((n: any) => [n.id, n.name]));
    const links = await page.$$eval('svg[data-testid=topology] g.link', (els) => els.map((e) => ({ pair: e.getAttribute('data-link')!, kind: e.getAttribute('data-kind'), text: e.textContent })));
    expect(links).toHaveLength(3);
    for (const l of api.links) {
      const shown = links.find((x) => x.pair === `${byId.get(l.a)}|${byId.get(l.b)}`);
      expect(shown, `link ${byId.get(l.a)}-${byId.get(l.b)}`).toBeTruthy();
      expect(shown!.kind).toBe(l.kind);
      // The veths of the test net are Ethernet; figures are the measured ones, formatted.
      expect(shown!.text).toContain('Ethernet');
      expect(shown!.text).toMatch(/\d+(\.\d)? (µs|ms) · \d+(\.\d)? (Gb|Mb)\/s/);
    }
    const rows = await page.$$eval('[data-testid=node-table] tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    expect(rows).toHaveLength(3);
    for (const n of api.nodes) {
      const row = rows.find((r) => r[0].startsWith(n.name));
      expect(row, n.name).toBeTruthy();
      expect(row![1]).toBe(n.chip);
      expect(row![2]).toMatch(/^\d+(\.\d)? [KMGT]?i?B \/ \d+(\.\d)? [KMGT]?i?B$/);
      expect(row![4]).toMatch(/^\d+\.\d\d/); // load average per core
    }
    await screenshot(page, '1-topology');
  }, 60_000);

  it('loads a model with the Load button and shows which node holds which layers', async () => {
    await page.selectOption('form.load-form select[name=model]', MODEL);
    await page.selectOption('form.load-form select[name=strategy]', 'pipeline');
    await page.fill('form.load-form input[name=nodes]', '2');
    await page.click('form.load-form button[type=submit]');
    const inst = page.locator(`.instance[data-model="${MODEL}"]`);
    await inst.waitFor();
    await expect.poll(() => inst.locator('[data-testid=instance-state]').textContent(), { timeout: 150_000, interval: 1000 }).toBe('ready');
    const api = daemons[0].get('/api/dashboard/instances').instances[0];
    const byId = new Map<string, string>(daemons[0].get('/api/cluster').nodes.map((n: any) => [n.id, n.name]));
    const rows = await inst.locator('table.ranks tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows).toEqual(api.stages.map((s: any, i: number) => [String(i + 1), `${s.layers[0]}–${s.layers[1] - 1}`, byId.get(s.nodes[0]), 'whole layers']));
    expect(new Set(rows.map((r) => r[2])).size).toBe(2);
    // A forced layout has no plan prediction of its own: the page shows the cost model's for this layout.
    expect(await inst.locator('[data-testid=predicted-tps]').textContent()).toMatch(/^\d+(\.\d)? tok\/s$/);
    // Plan preview for the same model: the planner's choice with its runners-up.
    await page.selectOption('[data-testid=plan-preview] select', MODEL);
    await page.locator('[data-testid=plan-preview] ul.explain li').first().waitFor();
    // Each runner-up is listed with a prediction or a reason it could not be placed, and why it lost.
    const alternatives = await page.$$eval('[data-testid=alternatives] tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    const planned = daemons[0].get(`/api/dashboard/plan?model=${encodeURIComponent(MODEL)}`);
    expect(alternatives).toHaveLength(planned.planner.alternatives.length);
    expect(alternatives.length).toBeGreaterThan(0);
    for (const [what, , why] of alternatives) {
      expect(what).toMatch(/^(single|pipeline|tensor|hybrid)/);
      expect(why.length).toBeGreaterThan(10);
      expect(why).not.toMatch(/12D3KooW/); // peer ids are shown as node names
    }
    await screenshot(page, '2-placement');
  }, 200_000);

  it('streams a chat reply into the page and shows its tokens/s and the instance\'s measured speed', async () => {
    await page.selectOption('select[name=chat-model]', MODEL);
    // Record every length the reply had while it streamed.
    await page.evaluate(() => {
      const w = window as unknown as { lengths: number[] };
      w.lengths = [];
      new MutationObserver(() => {
        // The reply as shown: its reasoning (the bundled model may think first) and its answer.
        const m = [...document.querySelectorAll('[data-testid=chat-log] .msg.assistant')].at(-1);
        const said = [...(m?.querySelectorAll('.reasoning, .content') ?? [])].map((e) => e.textContent?.replace(/^…$/, '') ?? '').join('');
        const n = said.length;
        if (n > 0 && n !== w.lengths.at(-1)) w.lengths.push(n);
      }).observe(document.querySelector('[data-testid=chat-log]')!, { subtree: true, childList: true, characterData: true });
    });
    await page.fill('form.chat-input input[name=prompt]', 'Who made the light?');
    await page.click('form.chat-input button[type=submit]');
    // The reply ends with its stats line, or with an error shown in the page (fail with its words).
    await page.locator('[data-testid=chat-stats], [data-testid=chat-error]').last().waitFor({ timeout: 120_000 });
    expect(await page.locator('[data-testid=chat-error]').allTextContents()).toEqual([]);
    const stats = page.locator('[data-testid=chat-stats]').last();
    expect(await stats.textContent()).toMatch(/^\d+ tokens · \d+(\.\d)? tok\/s · first token after \d+ ms$/);
    const lengths = await page.evaluate(() => (window as unknown as { lengths: number[] }).lengths);
    const last = page.locator('[data-testid=chat-log] .msg.assistant').last();
    const reply = (await last.locator('.reasoning, .content').allTextContents()).join('');
    expect(reply!.length).toBeGreaterThan(0);
    // Streamed: the text grew in several steps, ending at the full reply.
    expect(lengths.length, JSON.stringify(lengths)).toBeGreaterThan(2);
    expect(lengths.at(-1)).toBe(reply!.length);
    expect(await page.locator('[data-testid=chat-error]').count()).toBe(0);
    // The instance's measured speed arrives with its next status.
    await expect.poll(() => page.locator(`.instance[data-model="${MODEL}"] [data-testid=measured-tps]`).textContent(), { timeout: 15_000 }).toMatch(/^\d+(\.\d)? tok\/s$/);
    await screenshot(page, '3-chat');

  }, 180_000);

  it('says in words why a reply failed (the prompt does not fit the context)', async () => {
    await page.click('.chat-bar button.link'); // clear
    await page.fill('form.chat-input input[name=prompt]', 'And the earth was without form, and void. '.repeat(60));
    await page.click('form.chat-input button[type=submit]');
    const error = page.locator('[data-testid=chat-error]');
    await error.waitFor({ timeout: 60_000 });
    // The demo model holds 2048 tokens (bytes) of context; the page says so before sending (the chat trims old turns, not the new message).
    expect(await error.textContent()).toMatch(/^your message is about \d+ tokens, too long for the model's context of 2048 tokens with room for an answer: say it in fewer words$/);
  }, 90_000);

  it('Stop ends a reply that is waiting or streaming', async () => {
    await page.click('.chat-bar button.link');
    // Keep the instance busy (it runs one request at a time, the rest wait in its queue) so the page's
    // request is still waiting when Stop is pressed.
    // The demo model decodes ~1000 tokens/s here: 40 sampled requests (greedy text can hit end-of-text
    // within a few tokens) keep it busy for a few seconds.
    const body = (seed: number) => JSON.stringify({ model: MODEL, prompt: 'In the beginning', max_tokens: 100, temperature: 1, seed });
    const busy = Array.from({ length: 40 }, (_, i) => net!.hosts[0].spawn('curl', ['-s', '-m', '90', '-H', 'content-type: application/json', '-d', body(i), 'http://127.0.0.1:52415/v1/completions'], { stdio: 'ignore' }));
    const busyDone = Promise.all(busy.map((c) => new Promise((r) => c.on('exit', r))));
    await waitFor(
      'the instance to have requests queued',
      () => {
        const s = daemons[0].tryGet('/api/dashboard/instances')?.instances[0]?.status;
        return s && s.active >= 1 && s.queued >= 4;
      },
      30_000,
      50,
    );
    await page.fill('form.chat-input input[name=prompt]', 'Hello');
    await page.click('form.chat-input button[type=submit]');
    await page.locator('form.chat-input button.danger', { hasText: 'Stop' }).click();
    await expect.poll(() => page.locator('[data-testid=chat-stats]').last().textContent()).toMatch(/^stopped after \d+ pieces?( \(left out of the conversation\))?$/);
    expect(await page.locator('form.chat-input button[type=submit]').count()).toBe(1);
    expect(await page.locator('[data-testid=chat-error]').count()).toBe(0);
    await busyDone;
  }, 90_000);

  it('a load the pod cannot place shows the reason in the page', async () => {
    await page.selectOption('form.load-form select[name=strategy]', 'tensor');
    await page.fill('form.load-form input[name=nodes]', '5');
    await page.click('form.load-form button[type=submit]');
    const error = page.locator('[data-testid=load-error]');
    await error.waitFor();
    expect(await error.textContent()).toBe(`cannot place ${MODEL}: tensor over 5 nodes needs 5 live nodes; the pod has 3`);
    // Nothing was placed for the refused request.
    expect(await page.locator('.instance .tag', { hasText: 'tensor' }).count()).toBe(0);
  });

  it('a killed node disappears from the view', async () => {
    const victim = daemons[2];
    victim.kill('SIGKILL');
    // The view settles on the two survivors (a survivor may blink out while the pod elects a new coordinator on a busy machine).
    await page.waitForFunction(
      (want) => [...document.querySelectorAll('svg[data-testid=topology] g.node')].map((g: any) => g.getAttribute('data-node')).sort().join() === want && document.querySelectorAll('svg[data-testid=topology] g.link').length === 1,
      [names[0], names[1]].sort().join(),
      { timeout: 45_000 },
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}; the page shows nodes ${JSON.stringify(await nodeNames(page))}, ${await page.locator('svg[data-testid=topology] g.link').count()} link(s); /api/cluster: ${JSON.stringify(daemons[0].tryGet('/api/cluster')?.links)} ${JSON.stringify(daemons[0].tryGet('/api/cluster')?.nodes.map((n: any) => n.name))}`);
    });
    expect(await nodeNames(page)).not.toContain(names[2]);
    expect(await page.locator('svg[data-testid=topology] g.link').count()).toBe(1);
    expect(await page.locator('[data-testid=node-table] tbody tr').count()).toBe(2);
    await screenshot(page, '4-node-gone');
  }, 60_000);
});
