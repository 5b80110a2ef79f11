/**
 * The page against recorded API answers for a pod this machine cannot build: four Macs with RDMA over
 * Thunderbolt 5, Thunderbolt TCP, Ethernet and Wi-Fi links, and a hybrid instance (2 stages × tensor 2).
 * Every request of the page is answered by playwright's router (nothing listens, nothing leaves the
 * browser), so this checks the drawing of each link kind and of tensor slices. No root needed; skips
 * without Chromium unless ORCHARD_REQUIRE_BROWSER_TESTS=1.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard, type DashboardBuild } from '@orchard/dashboard';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

const missing = browserMissing();
// Macs' memory comes in binary units: a "512 GB" Mac Studio has 512 GiB.
const GiB = 2 ** 30;
const MiB = 2 ** 20;
const id = (n: string) => `12D3KooW${n.padEnd(44, 'x')}`;
const mac = (name: string, chip: string, gpuCores: number, memGB: number, freeGB: number, load: number) => ({
  id: id(name), name, hostname: `${name}.local`, chip, memoryBytes: memGB * GiB, availableBytes: freeGB * GiB, gpuCores, cpuCores: 32, os: 'darwin 25.2.0', load,
});
const nodes = [mac('studio-a', 'Apple M3 Ultra', 80, 512, 402, 0.41), mac('studio-b', 'Apple M3 Ultra', 80, 512, 398, 0.38), mac('mini', 'Apple M4 Pro', 20, 64, 41, 0.12), mac('air', 'Apple M3', 10, 24, 9, 0.07)];
const link = (a: string, b: string, kind: string, latencyUs: number, bandwidthGbps: number) => ({ a: id(a), b: id(b), kind, latencyUs, bandwidthGbps });
const links = [link('studio-a', 'studio-b', 'rdma', 9, 76.2), link('studio-a', 'mini', 'thunderbolt', 61, 31.5), link('mini', 'studio-b', 'ethernet', 180, 9.4), link('air', 'studio-a', 'wifi', 2400, 0.62)];
const cluster = { nodes, links, paths: links.map((l) => ({ ...l, aInterface: 'en2', bInterface: 'en3', address: '10.0.0.2', rdmaCapable: l.kind === 'rdma', measuredAt: 0, measuredBy: l.a })), mode: 'private', coordinator: id('studio-a') };
const instance = {
  id: 'qwen3-235b-1', model: 'mlx-community/Qwen3-235B-A22B-4bit', placedAt: 0, nodes: [id('studio-a'), id('studio-b'), id('mini'), id('air')], strategy: 'hybrid',
  stages: [{ layers: [0, 47], nodes: [id('studio-a'), id('studio-b')] }, { layers: [47, 94], nodes: [id('mini'), id('air')] }], tensorParallel: 2,
  requested: { strategy: 'auto' }, predicted: { decodeTokensPerSecond: 24.6, prefillTokensPerSecond: 410, ttftMs: 640 },
  status: { ready: true, active: 1, queued: 0, capacity: 64, failed: null, decodeTokensPerSecond: 21.9 },
};

/** mini fetching its stage: most bytes from studio-a over two cables, the rest from the hub; air dropped. */
const progress = [
  {
    node: id('mini'), model: instance.model, phase: 'download', done: 61e9, total: 122e9, file: 'model-00031-of-00062.safetensors', at: 0,
    sources: { hub: 1.2 * GiB, [id('studio-a')]: 52.4 * GiB, [id('air')]: 100 * MiB },
    links: [{ source: id('studio-a'), link: '10.10.0.1:46001', bytes: 30e9, rate: 5.1 * GiB }, { source: id('studio-a'), link: '10.10.1.1:46001', bytes: 22.4e9, rate: 4.2 * GiB }, { source: 'hub', link: 'hub', bytes: 1.2e9, rate: 110 * MiB }],
    badPeers: [id('air')],
  },
];

let browser: Browser | undefined;
let build: DashboardBuild;

describe.skipIf(!!missing && !REQUIRE_BROWSER)('dashboard drawing (recorded answers of a Mac pod)', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    build = await buildDashboard();
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close().catch(() => {});
  });

  it('draws each link kind with its figures, and the tensor slices of a hybrid instance', async () => {
    const page = await browser!.newPage({ viewport: { width: 1440, height: 1000 } });
    await page.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      const asset = build.assets.get(url.pathname);
      const json = (body: unknown, status = 200) => route.fulfill({ status, contentType: 'application/json', body: JSON.stringify(body) });
      if (asset) return route.fulfill({ status: 200, contentType: asset.type, body: asset.body });
      if (url.pathname === '/api/events') return route.fulfill({ status: 200, contentType: 'text/event-stream', body: `event: cluster\ndata: ${JSON.stringify(cluster)}\n\n` });
      if (url.pathname === '/api/dashboard/instances') return json({ instances: [instance] });
      if (url.pathname === '/v1/models') return json({ object: 'list', data: [{ id: instance.model }, { id: 'meta-llama/Llama-3.1-405B' }] });
      if (url.pathname === '/api/dashboard/progress') return json({ progress });
      if (url.pathname === '/api/dashboard/plan') return json({ model: url.searchParams.get('model'), placement: null, planner: null, error: 'cannot place meta-llama/Llama-3.1-405B: needs 410 GB with KV cache; the pod has 384 GB free' });
      return json({ error: { message: `no route ${url.pathname}` } }, 404);
    });
    await page.goto('http://dashboard.test/');
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('svg[data-testid=topology] g.link').length === 4);
    const drawn = await page.$$eval('svg[data-testid=topology] g.link', (els) =>
      els.map((e) => ({ kind: e.getAttribute('data-kind'), text: e.textContent, stroke: e.querySelector('line')!.getAttribute('stroke'), dash: e.querySelector('line')!.getAttribute('stroke-dasharray') })),
    );
    expect(drawn.map((d) => d.kind)).toEqual(['rdma', 'thunderbolt', 'ethernet', 'wifi']);
    expect(drawn.map((d) => d.text)).toEqual(['RDMA9 µs · 76 Gb/s', 'Thunderbolt TCP61 µs · 32 Gb/s', 'Ethernet180 µs · 9.4 Gb/s', 'Wi-Fi2.4 ms · 620 Mb/s']);
    expect(new Set(drawn.map((d) => d.stroke)).size).toBe(4); // each kind its own colour
    expect(drawn.find((d) => d.kind === 'wifi')!.dash).not.toBe('');
    const rows = await page.$$eval('[data-testid=node-table] tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows[0]).toEqual(['studio-acoordinator', 'Apple M3 Ultra', '110 GiB / 512 GiB', '80', '0.41 · 1 rank']);
    const ranks = await page.$$eval('table.ranks tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(ranks).toEqual([
      ['1', '0–46', 'studio-a', 'tensor 1/2'],
      ['1', '0–46', 'studio-b', 'tensor 2/2'],
      ['2', '47–93', 'mini', 'tensor 1/2'],
      ['2', '47–93', 'air', 'tensor 2/2'],
    ]);
    expect(await page.textContent('[data-testid=predicted-tps]')).toBe('24.6 tok/s');
    expect(await page.textContent('[data-testid=measured-tps]')).toBe('21.9 tok/s');
    expect(await page.textContent('[data-testid=progress-sources]')).toBe('from hub 1.2 GiB · studio-a 52.4 GiB · air 100 MiB');
    expect(await page.textContent('[data-testid=progress-links]')).toBe('links: studio-a 10.10.0.1:46001 5.1 GiB/s · studio-a 10.10.1.1:46001 4.2 GiB/s · hub 110 MiB/s');
    expect(await page.textContent('[data-testid=progress] small.error')).toBe('dropped air: it served bytes that do not match the pod digest');
    await page.selectOption('[data-testid=plan-preview] select', 'meta-llama/Llama-3.1-405B');
    await expect.poll(() => page.textContent('[data-testid=plan-error]').catch(() => null)).toBe('cannot place meta-llama/Llama-3.1-405B: needs 410 GB with KV cache; the pod has 384 GB free');
    await screenshot(page, '0-mac-pod-recorded');
  }, 60_000);
});
