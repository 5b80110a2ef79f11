/** `--context N` from the CLI to the instance: load places it with that context, chat meets that limit. */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Orchard } from '../../src/orchard.js';
import { runCli, startServingDaemon, waitFor } from '../serve/in-process-pod.js';

let daemon: Orchard;
let dataDir: string;
let url: string;
beforeAll(async () => {
  ({ daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-context-', bootstrap: [] }));
  url = `http://127.0.0.1:${daemon.apiPort}`;
  await waitFor('the node in the pod', async () => ((await (await fetch(`${url}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length > 0 || undefined, 30_000, 100);
});
afterAll(async () => {
  await daemon?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('--context', () => {
  it('load --context 64 places the demo model with a 64-token context, and the chat meets that limit', async () => {
    const load = await runCli(['load', 'orchard-demo', '--context', '64', '--json', '--url', url]);
    expect(load.code, load.stderr).toBe(0);
    expect(JSON.parse(load.stdout).context).toBe(64);
    const chat = await runCli(['chat', 'orchard-demo', '--url', url, '-m', 'And it came to pass in those days, that there went out a decree from Caesar']);
    expect(chat.code).toBe(1);
    expect(chat.stderr).toMatch(/your message is about \d+ tokens, too long for the model's context of 64 tokens/);
  }, 180_000);

  it('refuses a context that cannot hold a prompt and an answer', async () => {
    const r = await runCli(['load', 'orchard-demo', '--context', '1', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--context must be a whole number of tokens \(2 or more\), got "1"/);
  }, 60_000);
});
