/**
 * `orchard load MODEL [--strategy auto|pipeline|tensor] [--nodes N]`: place a model on the pod and wait
 * until it serves; `orchard unload ID|MODEL`: remove instances; `orchard models`: what the pod serves.
 */
import type { Command } from 'commander';
import { cliSettings } from '../../config/cli.js';
import { CliError } from '../errors.js';
import { call } from './serve-client.js';
import { readCatalog, type CatalogModel } from '../catalog.js';
import { formatBytes } from '../pull-progress.js';
import { catalogFits } from '../models-table.js';

/** The catalog as a table (or JSON): name, hub repo, size, parameters, context, gated. */
export function formatCatalog(models: CatalogModel[], json = false, fits: Map<string, string[] | null> = new Map()): string {
  if (json) return `${JSON.stringify(models.map((m) => (fits.get(m.name) ? { ...m, fits: fits.get(m.name) } : m)), null, 2)}\n`;
  const fitText = (m: CatalogModel) => (fits.get(m.name) ? `fits: ${fits.get(m.name)!.join(', ') || 'no example cluster'}` : '');
  const rows = [
    ['NAME', 'REPO', 'SIZE', 'PARAMS', 'CONTEXT', 'GGUF', ''],
    ...models.map((m) => [m.name, m.repo, `${m.config ? '≈' : ''}${formatBytes(m.bytes)}`, m.parameters, String(m.context), m.gguf ? `${m.name}:${m.gguf.quant}` : '', [m.gated ? 'gated: needs HF_TOKEN' : '', fitText(m)].filter(Boolean).join('; ')]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const table = rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()).join('\n');
  return `${table}\n\nrun one with \`orchard run NAME\` (pulls it on first use; NAME:QUANT for its GGUF); sizes are the hub's, rounded (≈: estimated from the config); fits: the example clusters (examples/clusters/) the planner fits it on\n`;
}

interface InstanceJson {
  id: string;
  model: string;
  strategy: string;
  tensorParallel: number;
  stages: { layers: [number, number]; nodes: string[] }[];
  predicted: { decodeTokensPerSecond?: number } | null;
  status: { ready: boolean };
}

const short = (id: string) => (id.length > 16 ? `…${id.slice(-8)}` : id);

function describeInstance(i: InstanceJson): string {
  const stages = i.stages.map((s) => `layers ${s.layers[0]}-${s.layers[1] - 1} on ${s.nodes.map(short).join(' + ')}`).join(' | ');
  const speed = i.predicted?.decodeTokensPerSecond ? `, predicted ${i.predicted.decodeTokensPerSecond.toFixed(1)} tok/s` : '';
  return `${i.id}  ${i.model}  ${i.strategy}${i.tensorParallel > 1 ? ` (tensor ${i.tensorParallel})` : ''}  ${i.status.ready ? 'ready' : 'starting'}${speed}\n    ${stages}\n`;
}

/** `--context N`: a whole number of tokens, at least 2 (a prompt token and an answer). */
export function contextTokens(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 2) throw new CliError(`--context must be a whole number of tokens (2 or more), got ${JSON.stringify(v)}`, 2);
  return n;
}

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--nodes must be a positive integer, got ${JSON.stringify(v)}`, 2);
  return n;
}

export function registerLoad(program: Command): void {
  program
    .command('load')
    .description('place a model on the pod (the coordinator plans it) and wait until it serves')
    .argument('<model>', "model id: 'orchard-demo' or ORG/NAME from `orchard pull`")
    .option('--strategy <s>', 'auto (the planner chooses), pipeline or tensor', 'auto')
    .option('--nodes <n>', 'nodes for a forced strategy (default 2)', positiveInt)
    .option('--context <tokens>', "tokens per sequence (prompt + answer) the instance holds; default: the daemon's (4096, or the model's maximum if smaller)", contextTokens)
    .option('--json', 'print the instance as JSON')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (model: string, opts: { strategy: string; nodes?: number; context?: number; json?: boolean; url: string; token?: string }) => {
      if (!['auto', 'pipeline', 'tensor'].includes(opts.strategy)) throw new CliError(`--strategy must be auto, pipeline or tensor, got ${JSON.stringify(opts.strategy)}`, 2);
      const res = await call(opts, 'POST', '/api/instances', { model, strategy: opts.strategy, ...(opts.nodes ? { nodes: opts.nodes } : {}), ...(opts.context ? { context: opts.context } : {}) });
      const { instance } = (await res.json()) as { instance: InstanceJson };
      process.stdout.write(opts.json ? `${JSON.stringify(instance, null, 2)}\n` : describeInstance(instance));
    });

  program
    .command('unload')
    .description('remove an instance (by id) or every instance of a model')
    .argument('<id-or-model>')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (what: string, opts: { url: string; token?: string }) => {
      const { instances } = (await (await call(opts, 'GET', '/api/instances')).json()) as { instances: InstanceJson[] };
      const targets = instances.filter((i) => i.id === what || i.model === what);
      if (!targets.length) throw new CliError(`no instance or model ${JSON.stringify(what)} is loaded (see \`orchard models\`)`, 4);
      for (const t of targets) {
        await call(opts, 'DELETE', `/api/instances/${encodeURIComponent(t.id)}`);
        process.stdout.write(`unloaded ${t.id}\n`);
      }
    });

  program
    .command('models')
    .description('models the pod can serve and the instances running now; --available: models you can pull')
    .option('--json', 'machine-readable output')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .option('--available', 'the curated list of models known to fit the engine (short names for `orchard run NAME`), no daemon needed')
    .action(async (opts: { json?: boolean; url: string; token?: string; available?: boolean }) => {
      if (opts.available) {
        const catalog = readCatalog();
        process.stdout.write(formatCatalog(catalog, opts.json, await catalogFits(catalog)));
        return;
      }
      const models = (await (await call(opts, 'GET', '/v1/models')).json()) as { data: { id: string }[] };
      const { instances } = (await (await call(opts, 'GET', '/api/instances')).json()) as { instances: InstanceJson[] };
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ models: models.data.map((m) => m.id), instances }, null, 2)}\n`);
        return;
      }
      process.stdout.write(models.data.length ? `models: ${models.data.map((m) => m.id).join(', ')}\n` : 'no models (pull one with `orchard pull ORG/NAME`)\n');
      process.stdout.write(instances.length ? `instances:\n${instances.map(describeInstance).join('')}` : 'no instances loaded\n');
    });
}
