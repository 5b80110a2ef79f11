import type { Command } from 'commander';
import type { NetworkStatus } from '../../network/status.js';
import { cliSettings } from '../../config/cli.js';
import { formatNetworkStatus } from '../format-network.js';
import { call } from './serve-client.js';

/** `orchard network status [--json]`: the wide-area network as this node sees it. */
export function registerNetwork(program: Command): void {
  const network = program.command('network').description('the wide-area network of pods this node joined (orchard start --network NAME)');
  network
    .command('status')
    .description('every node and pod seen, what they offer, balances from receipts, recent jobs')
    .option('--json', 'machine-readable output')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (opts: { json?: boolean; url: string; token?: string }) => {
      const status = (await (await call(opts, 'GET', '/api/network', undefined, 10_000)).json()) as NetworkStatus;
      process.stdout.write(opts.json ? `${JSON.stringify(status, null, 2)}\n` : formatNetworkStatus(status));
    });
}
