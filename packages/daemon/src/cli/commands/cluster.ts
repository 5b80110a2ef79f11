import type { Command } from 'commander';
import { getJson } from '../client.js';
import { cliSettings } from '../../config/cli.js';

/** `orchard cluster --json`: the planner's cluster JSON from the local daemon. */
export function registerCluster(program: Command): void {
  program
    .command('cluster')
    .description("print the pod as the planner's cluster JSON (nodes, measured links, names, mode)")
    .option('--json', 'JSON output (the only format; accepted for symmetry with status)')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (opts: { url: string; token?: string }) => {
      const cluster = await getJson(opts.url, '/api/cluster', { token: opts.token });
      process.stdout.write(`${JSON.stringify(cluster, null, 2)}\n`);
    });
}
