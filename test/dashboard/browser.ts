/**
 * Headless Chromium for the dashboard tests: Debian's /usr/bin/chromium driven by playwright-core
 * (flags from ../shared/notes/platform.md). `launchBrowser({ netns })` starts it inside a test
 * namespace (through `ip netns exec`, which keeps playwright's pipe to the browser), so the page
 * reaches that namespace's daemon on 127.0.0.1 and no traffic leaves the test's own network.
 *
 * No Chromium: the suites skip and say why, unless ORCHARD_REQUIRE_BROWSER_TESTS=1 makes that a failure.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { REPO_ROOT } from '../harness/daemons.js';

export const CHROMIUM = process.env.ORCHARD_CHROMIUM ?? '/usr/bin/chromium';
export const REQUIRE_BROWSER = process.env.ORCHARD_REQUIRE_BROWSER_TESTS === '1';
export const ARTIFACTS = join(REPO_ROOT, 'test-artifacts/dashboard');

export const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'];

/** Why the browser tests cannot run here, or null when they can. */
export function browserMissing(): string | null {
  if (!existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (Debian: apt-get install chromium; pnpm test does it as root)`;
  return null;
}

export async function launchBrowser(o: { netns?: string } = {}): Promise<Browser> {
  let executablePath = CHROMIUM;
  if (o.netns) {
    const dir = mkdtempSync(join(os.tmpdir(), 'orchard-chromium-'));
    executablePath = join(dir, 'chromium-in-netns');
    writeFileSync(executablePath, `#!/bin/sh\nexec ip netns exec ${o.netns} ${CHROMIUM} "$@"\n`);
    chmodSync(executablePath, 0o755);
  }
  return chromium.launch({ executablePath, headless: true, args: FLAGS, timeout: 60_000 });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
