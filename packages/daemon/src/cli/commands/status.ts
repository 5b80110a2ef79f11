import type { Command } from 'commander';
import { formatStatus, type DataPlaneJson, type StatusJson } from '../format-status.js';
import { getJson } from '../client.js';
import { cliSettings } from '../../config/cli.js';

interface InstanceView {
  id: string;
  model: string;
  nodes: string[];
  links?: DataPlaneJson['links'];
}

/** Each instance's data-plane links (RDMA or TCP, and why); null from a daemon without instances API. */
async function dataPlaneOf(url: string, token: string | undefined): Promise<DataPlaneJson[] | null> {
  try {
    const { instances } = (await getJson(url, '/api/instances', { token })) as { instances: InstanceView[] };
    return instances.map((i) => ({ instance: i.id, model: i.model, ranks: i.nodes.length, links: i.links ?? [] }));
  } catch {
    return null;
  }
}

/** Every node's downloads (by source and link); null from a daemon without the dashboard API. */
async function downloadsOf(url: string, token: string | undefined): Promise<StatusJson['downloads'] | null> {
  try {
    return ((await getJson(url, '/api/dashboard/progress', { token })) as { progress: NonNullable<StatusJson['downloads']> }).progress;
  } catch {
    return null;
  }
}

/** `orchard status [--json]`: nodes, chips, memory, links, pod mode and each instance's data-plane links. */
export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('show the pod: nodes, chips, memory, measured links, mode, downloads by source')
    .option('--json', 'machine-readable output')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (opts: { json?: boolean; url: string; token?: string }) => {
      const status = (await getJson(opts.url, '/api/status', { token: opts.token })) as StatusJson;
      const dataPlane = await dataPlaneOf(opts.url, opts.token);
      if (dataPlane) status.dataPlane = dataPlane;
      const downloads = await downloadsOf(opts.url, opts.token);
      if (downloads?.length) status.downloads = downloads;
      if (opts.json) {
        const cluster = await getJson(opts.url, '/api/cluster', { token: opts.token });
        process.stdout.write(`${JSON.stringify({ ...status, cluster }, null, 2)}\n`);
      } else {
        process.stdout.write(formatStatus(status));
      }
    });
}
