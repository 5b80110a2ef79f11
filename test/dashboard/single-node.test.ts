/**
 * The dashboard of one fresh daemon, as a new user first opens it: the bundled model is served but not
 * loaded yet. No root needed; skips without Chromium unless ORCHARD_REQUIRE_BROWSER_TESTS=1.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoopbackDaemon } from '../harness/daemons.js';
import { browserMissing, launchBrowser, REQUIRE_BROWSER, screenshot } from './browser.js';

const missing = browserMissing();
let browser: Browser | undefined;
let daemon: ChildProcess | undefined;
let base = '';
let dataDir = '';

describe.skipIf(!!missing && !REQUIRE_BROWSER)('dashboard of a single fresh daemon', () => {
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_BROWSER_TESTS=1 but ${missing}`);
    dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-dash-single-'));
    const d = await startLoopbackDaemon(dataDir, { args: ['--name', 'solo'] });
    daemon = d.child;
    base = d.base;
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    daemon?.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the node, the model with its context and that it loads on first request, and a chat that keeps going', async () => {
    const page: Page = await browser!.newPage({ viewport: { width: 1280, height: 1000 } });
    await page.goto(base);
    await page.waitForSelector('[data-node="solo"]', { timeout: 60_000 });
    await page.waitForSelector('[data-testid="plan-preview"] [data-testid="preview-context"]', { timeout: 60_000 });
    await screenshot(page, 'single-before');
    const text = async (sel: string) => ((await page.locator(sel).first().textContent()) ?? '').replace(/\s+/g, ' ').trim();
    // One node: the canvas says why it is alone and how to add a machine; the memory bar says what it is.
    expect(await text('[data-testid="topology-alone"]')).toMatch(/Only this machine so far/);
    expect(await text('[data-testid="node-memory"]')).toMatch(/^memory [\d.]+ [KMG]iB \/ [\d.]+ GiB$/);
    // Not loaded yet, and the page says the first request loads it; the model's context is shown.
    expect(await text('[data-testid="no-instance"]')).toMatch(/orchard-demo loads on its first chat request/);
    expect(await text('[data-testid="chat-hint"]')).toMatch(/orchard-demo is not loaded yet: your first message loads it/);
    expect(await text('[data-testid="preview-context"]')).toBe('; context 2,048 tokens');
    // Small models are not "0.0 GiB of weights".
    expect(await page.locator('body').innerText()).not.toMatch(/0\.0 [KMG]i?B/);
    // The page's own sizes in GiB/MiB as the CLI writes them; the planner's explanation below it is its own text.
    expect(await page.locator('[data-testid="plan-preview"]').innerText()).toMatch(/weights 3\.3 MiB; context 2,048 tokens/);
    expect(await page.locator('[data-testid="plan-preview"]').innerText()).toMatch(/orchard-demo: 4 layers, 3\.4 MB of weights/);

    // Chat until the conversation outgrows the 2048-token context (bytes): old turns are left out with a note.
    const answers = () => page.locator('[data-testid="chat-stats"]').count();
    for (let k = 1; k <= 4; k++) {
      await page.fill('input[name="prompt"]', `And the LORD spake unto Moses, saying ${k}: ${'Speak unto the children of Israel, and say unto them. '.repeat(12)}`);
      await page.click('button[type="submit"]:has-text("Send")');
      await page.locator('[data-testid="chat-stats"]').nth(k - 1).waitFor({ timeout: 120_000 });
    }
    expect(await answers()).toBe(4);
    expect(await page.locator('[data-testid="chat-error"]').count()).toBe(0);
    const notes = await page.locator('[data-testid="chat-note"]').allInnerTexts();
    expect(notes.join('\n')).toMatch(/left out \d+ more old turns? to fit the model's context of 2048 tokens/);
    await page.waitForSelector('[data-testid="instance-context"]', { timeout: 30_000 });
    expect(await text('[data-testid="instance-context"]')).toBe('context 2,048 tokens');
    expect(await page.locator('[data-testid="chat-hint"]').count()).toBe(0);
    expect(await text('[data-testid="chat-context"]')).toBe('context 2,048 tokens');
    await screenshot(page, 'single-after-chat');
  }, 400_000);
});
