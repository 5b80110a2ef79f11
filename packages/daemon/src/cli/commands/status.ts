import type { Command } from 'commander';
import { formatStatus, type StatusJson } from '../format-status.js';
import { DEFAULT_URL, getJson } from '../client.js';

/** `orchard status [--json]`: nodes, chips, memory, links and pod mode from the local daemon. */
export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('show the pod: nodes, chips, memory, measured links, mode')
    .option('--json', 'machine-readable output')
    .option('--url <url>', 'daemon API', process.env.ORCHARD_URL ?? DEFAULT_URL)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (opts: { json?: boolean; url: string; token?: string }) => {
      const status = (await getJson(opts.url, '/api/status', { token: opts.token })) as StatusJson;
      if (opts.json) {
        const cluster = await getJson(opts.url, '/api/cluster', { token: opts.token });
        process.stdout.write(`${JSON.stringify({ ...status, cluster }, null, 2)}\n`);
      } else {
        process.stdout.write(formatStatus(status));
      }
    });
}
