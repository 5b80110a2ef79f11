/**
 * A token-protected API: the page itself loads without the token (it holds no data), every API call
 * is refused, and the page asks for the token; a wrong one is refused in words, the right one (sent
 * as a Bearer header, also on the fetch-streamed /api/events) shows the pod. One daemon on this
 * machine's loopback (no namespaces needed); skips without Chromium unless ORCHARD_REQUIRE_BROWSER_TESTS=1.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoopbackDaemon } from '../harness/daemons.js';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

declare const document: any;

const missing = browserMissing();
const TOKEN = 'orchard-test-token-4b1d';

let daemon: ChildProcess | undefined;
let browser: Browser | undefined;
let dataDir = '';
let base = '';

describe.skipIf(!!missing && !REQUIRE_BROWSER)('dashboard with a token-protected API', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-dash-token-'));
    const d = await startLoopbackDaemon(dataDir, { args: ['--api-token', TOKEN, '--name', 'locked'], env: { ORCHARD_LOG_LEVEL: 'info' } });
    daemon = d.child;
    base = d.base;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close().catch(() => {});
    daemon?.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the page asks for the token, refuses a wrong one and shows the pod with the right one', async () => {
    // The API really is closed: no token, no data.
    expect((await fetch(`${base}/api/cluster`)).status).toBe(401);
    expect((await fetch(`${base}/api/cluster`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    for (const path of ['/api/dashboard/instances', '/api/dashboard/progress', '/api/dashboard/plan?model=orchard-demo', '/api/events', '/v1/models']) {
      expect((await fetch(`${base}${path}`)).status, path).toBe(401);
    }
    // Only the page and its assets are public (they hold no data).
    for (const path of ['/', '/dashboard/app.js', '/dashboard/app.css']) expect((await fetch(`${base}${path}`)).status, path).toBe(200);

    const page = await browser!.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(30_000);
    const refused: string[] = [];
    page.on('response', (r) => {
      if (r.status() === 401) refused.push(new URL(r.url()).pathname);
    });
    const res = await page.goto(`${base}/`);
    expect(res?.status()).toBe(200);
    const prompt = page.locator('[data-testid=token-prompt]');
    await prompt.waitFor();
    expect(await page.textContent('[data-testid=connection]')).toBe('token needed');
    expect(refused).toContain('/api/events');
    expect(await page.locator('svg[data-testid=topology] g.node').count()).toBe(0);
    await screenshot(page, '5-token-prompt');

    await page.fill('[data-testid=token-prompt] input[name=token]', 'wrong-token');
    await page.click('[data-testid=token-prompt] button[type=submit]');
    await expect.poll(() => prompt.locator('.error').textContent().catch(() => null)).toBe('That token was not accepted.');

    await page.fill('[data-testid=token-prompt] input[name=token]', TOKEN);
    await page.click('[data-testid=token-prompt] button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('svg[data-testid=topology] g.node').length === 1, undefined, { timeout: 60_000 });
    await expect.poll(() => page.textContent('[data-testid=connection]')).toBe('live');
    expect(await prompt.count()).toBe(0);
    expect(await page.getAttribute('svg[data-testid=topology] g.node', 'data-node')).toBe('locked');
    // Kept for the next visit; a reload goes straight to the pod.
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('svg[data-testid=topology] g.node').length === 1);
    expect(await prompt.count()).toBe(0);
    await screenshot(page, '6-token-accepted');
  }, 120_000);
});
