/**
 * The Network page against recorded answers (playwright's router answers every request; nothing
 * listens): five pods on three continents, one offline, one without a region; the map draws the
 * bundled land and a pin per placed pod, the table lists every pod, the lending switch sends the
 * policy change, and a daemon that joined no network says so. No root needed; skips without
 * Chromium unless ORCHARD_REQUIRE_BROWSER_TESTS=1.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard, type DashboardBuild } from '@orchard/dashboard';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

const missing = browserMissing();
const id = (n: string) => `12D3KooW${n.padEnd(44, 'x')}`;
const GiB = 2 ** 30;
const pod = (name: string, region: [string, number, number] | null, o: Record<string, unknown> = {}) => ({
  peer: id(name),
  self: false,
  online: true,
  pod: name,
  nodes: [{ name: `${name}-1`, chip: 'Apple M4 Max', memoryBytes: 128 * GiB }],
  region: region && { label: region[0], lat: region[1], lon: region[2] },
  models: [{ name: 'qwen3-32b', state: 'serving', decodeTps: 31.5 }],
  lending: 'idle',
  pricePer1M: 1000,
  tokensServed: 0,
  jobsServed: 0,
  reputation: 1,
  rttMs: 42,
  path: 'relayed',
  ...o,
});
const view = {
  network: 'home-pods',
  self: { peer: id('berlin'), addresses: [], reachable: false, relayReservations: ['/ip4/203.0.113.7/tcp/52418/p2p/R/p2p-circuit'] },
  routing: { enabled: true, priceCap: null, trusted: null },
  lending: { enabled: false, mode: 'idle', share: 0.5, pricePer1M: 1000, maxTokensPerJob: 1024, running: 0, served: 0, refused: 0, preempted: 0 },
  nodes: [
    pod('berlin', ['Berlin', 53, 13], { self: true, models: [], lending: null, rttMs: null, path: null }),
    pod('lisbon', ['Lisbon', 39, -9], { tokensServed: 1234 }),
    pod('osaka', ['Osaka', 35, 136], { nodes: [{ name: 'a', chip: 'Apple M3 Ultra', memoryBytes: 512 * GiB }, { name: 'b', chip: 'Apple M3 Ultra', memoryBytes: 512 * GiB }] }),
    pod('austin', ['Austin', 30, -98], { online: false }),
    pod('nowhere', null),
  ],
  balances: [
    { peer: id('lisbon'), earned: 1_234_000, spent: 0, net: 1_234_000, tokensServed: 1234, tokensRequested: 0 },
    { peer: id('berlin'), earned: 0, spent: 1_234_000, net: -1_234_000, tokensServed: 0, tokensRequested: 1234 },
  ],
  receipts: 1,
  jobs: [{ job: 'j1', role: 'requested', peer: id('lisbon'), model: 'qwen3-32b', at: 0, ok: true, tokens: 1234, charge: 1_234_000, path: 'relayed', found: 'dht', error: null }],
};

let browser: Browser | undefined;
let build: DashboardBuild;

/** Routes the page's requests: assets from the build, the rest from `api` (404 when it has no answer). */
async function openPage(api: (path: string, method: string, body: string | null) => unknown): Promise<Page> {
  const page = await browser!.newPage({ viewport: { width: 1440, height: 1100 } });
  await page.route('**/*', async (route) => {
    const req = route.request();
    const url = new URL(req.url());
    const asset = build.assets.get(url.pathname);
    if (asset) return route.fulfill({ status: 200, contentType: asset.type, body: asset.body });
    if (url.pathname === '/api/events') return route.fulfill({ status: 200, contentType: 'text/event-stream', body: `event: cluster\ndata: ${JSON.stringify({ nodes: [], links: [], paths: [], mode: 'open', coordinator: null })}\n\n` });
    const answer = api(url.pathname, req.method(), req.postData());
    if (answer === undefined) return route.fulfill({ status: 404, contentType: 'application/json', body: JSON.stringify({ error: { message: `no route ${url.pathname}` } }) });
    if (answer instanceof Response) return route.fulfill({ status: answer.status, contentType: 'application/json', body: await answer.text() });
    return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(answer) });
  });
  return page;
}

const podApi = (path: string) => ({ '/api/dashboard/instances': { instances: [] }, '/v1/models': { object: 'list', data: [] }, '/api/dashboard/progress': { progress: [] } })[path];

describe.skipIf(!!missing && !REQUIRE_BROWSER)('dashboard Network page (recorded answers)', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    build = await buildDashboard();
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close().catch(() => {});
  });

  it('puts every placed pod on the world map, lists all of them, and lends with one switch', async () => {
    const puts: unknown[] = [];
    let current = view;
    const page = await openPage((path, method, body) => {
      if (path === '/api/network/joined') return { joined: true };
      if (path === '/api/network') return current;
      if (path === '/api/network/lending' && method === 'PUT') {
        puts.push(JSON.parse(body ?? '{}'));
        current = { ...current, lending: { ...current.lending, ...(JSON.parse(body ?? '{}') as object) } };
        return current.lending;
      }
      return podApi(path);
    });
    await page.goto('http://dashboard.test/#network');
    await page.waitForSelector('svg[data-testid=network-map] g.pin');
    const land = await page.getAttribute('svg[data-testid=network-map] path.land', 'd');
    expect(land!.length).toBeGreaterThan(20_000); // the bundled outline, not a placeholder
    const pins = await page.$$eval('svg[data-testid=network-map] g.pin', (gs) => gs.map((g) => ({ cls: g.getAttribute('class'), x: Number(g.querySelector('circle')!.getAttribute('cx')), y: Number(g.querySelector('circle')!.getAttribute('cy')) })));
    expect(pins).toHaveLength(4); // the pod without a region is in the table only
    expect(pins.map((p) => p.cls)).toEqual(['pin self', 'pin online', 'pin online', 'pin offline']);
    // equirectangular: Berlin (53N, 13E) at x = 193, y = 37; Austin west and south of it
    expect(pins[0]).toMatchObject({ x: 193, y: 37 });
    expect(pins[3].x).toBeLessThan(pins[1].x);
    expect(pins[3].y).toBeGreaterThan(pins[0].y);
    const rows = await page.$$eval('[data-testid=network-nodes] tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows).toHaveLength(5);
    expect(rows[1]).toEqual(['lisbon', 'Lisbon', 'Apple M4 Max · 128 GiB', 'qwen3-32b 31.5 tok/s', '1234 tok', '42 ms', 'relayed', '1.00']);
    expect(rows[3][0]).toBe('austinoffline');
    expect(await page.textContent('[data-testid=network-balances]')).toContain('1.234');
    expect(await page.isChecked('[data-testid=lend-switch]')).toBe(false);
    await page.click('[data-testid=lend-switch]');
    await expect.poll(() => puts).toEqual([{ enabled: true }]);
    await expect.poll(() => page.isChecked('[data-testid=lend-switch]')).toBe(true);
    await screenshot(page, 'network-page');
  }, 60_000);

  it('a daemon that joined no network says so', async () => {
    const asked: string[] = [];
    const page = await openPage((path) => {
      asked.push(path);
      if (path === '/api/network/joined') return { joined: false, message: 'this node has not joined a network (start it with --network NAME --network-bootstrap MULTIADDR)' };
      return podApi(path);
    });
    const failed: string[] = [];
    page.on('response', (r) => void (r.status() >= 400 && failed.push(`${r.status()} ${new URL(r.url()).pathname}`)));
    await page.goto('http://dashboard.test/');
    await page.click('[data-testid=tab-network]');
    await expect.poll(() => page.textContent('[data-testid=network-absent]').catch(() => null)).toContain('has not joined a network');
    // Past the page's 3 s refresh: it asked again, and never for the view it would get a 404 for.
    await page.waitForTimeout(3500);
    expect(asked.filter((p) => p === '/api/network/joined').length).toBeGreaterThanOrEqual(2);
    expect(asked).not.toContain('/api/network');
    expect(failed).toEqual([]);
  }, 60_000);
});
