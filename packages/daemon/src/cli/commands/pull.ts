import type { Command } from 'commander';
import cliProgress from 'cli-progress';
import { HubClient, ModelStore, StoreError } from '../../store/index.js';
import { DEFAULT_URL } from '../client.js';
import { CliError } from '../errors.js';
import { call } from './serve-client.js';
import { defaultDataDir } from './service.js';

interface PodPullAnswer {
  dir: string;
  commit: string;
  hubBytes: number;
  peerBytes: number;
  bySource: Record<string, number>;
  badPeers: string[];
}

/** `--from-pod`: the running daemon pulls from its peers only (no listing or byte from the hub). */
async function pullFromPod(repo: string, opts: { url: string; token?: string; json?: boolean }): Promise<void> {
  const res = await call({ url: opts.url, token: opts.token }, 'POST', '/api/models/pull', { repo, fromPod: true }, 24 * 3600_000);
  const r = (await res.json()) as PodPullAnswer;
  if (opts.json) return void process.stdout.write(`${JSON.stringify(r)}\n`);
  const peers = Object.entries(r.bySource).filter(([k, n]) => k !== 'hub' && n > 0).map(([k, n]) => `${k.slice(-8)} ${n}`);
  process.stdout.write(`${repo}@${r.commit.slice(0, 12)} in ${r.dir} (${r.peerBytes} bytes from peers${peers.length ? `: ${peers.join(', ')}` : ''}; none from the hub)\n`);
  for (const p of r.badPeers) process.stdout.write(`dropped peer ${p}: it served bytes that do not match the pod digest\n`);
}

function parseLayers(text: string): [number, number] {
  const m = /^(\d+):(\d+)$/.exec(text);
  if (!m || Number(m[1]) >= Number(m[2])) throw new CliError(`--layers must look like START:END with START < END, got "${text}"`, 2);
  return [Number(m[1]), Number(m[2])];
}

export function registerPull(program: Command): void {
  program
    .command('pull')
    .description('download a model from the Hugging Face hub into the store (honours HF_ENDPOINT and HF_TOKEN)')
    .argument('<repo>', 'ORG/NAME')
    .option('--revision <rev>', 'branch, tag or commit', 'main')
    .option('--data-dir <dir>', 'data directory (default ~/.orchard)')
    .option('--layers <start:end>', 'fetch only these decoder layers (a pipeline stage)')
    .option('--embed', 'with --layers: also the token embedding')
    .option('--head', 'with --layers: also the final norm and LM head')
    .option('--json', 'print the result as JSON')
    .option('--from-pod', "through the running daemon, from the pod's peers only (no hub)")
    .option('--url <url>', 'with --from-pod: daemon API', process.env.ORCHARD_URL ?? DEFAULT_URL)
    .option('--token <token>', 'with --from-pod: API token (env ORCHARD_API_TOKEN)')
    .action(async (repo: string, opts) => {
      if (opts.fromPod) {
        if (opts.layers) throw new CliError('--from-pod pulls whole models (a stage is fetched by `orchard load`); drop --layers', 2);
        return pullFromPod(repo, opts);
      }
      const store = new ModelStore(opts.dataDir ?? defaultDataDir(), new HubClient());
      const selection = opts.layers
        ? { layers: parseLayers(opts.layers), embed: !!opts.embed, head: !!opts.head }
        : undefined;
      const bar =
        opts.json || !process.stderr.isTTY
          ? undefined
          : new cliProgress.SingleBar(
              { format: '{file} [{bar}] {percentage}% {value}/{total} bytes ({source})', stream: process.stderr, hideCursor: true },
              cliProgress.Presets.shades_classic,
            );
      let current = '';
      try {
        const result = await store.pull(repo, {
          revision: opts.revision,
          selection,
          onProgress: (e) => {
            if (!bar) return;
            if (e.file !== current) {
              if (current) bar.stop();
              current = e.file;
              bar.start(e.total, 0, { file: e.file, source: e.source });
            }
            bar.update(e.done, { file: e.file, source: e.source });
          },
        });
        bar?.stop();
        if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
        else process.stdout.write(`${repo}@${result.commit.slice(0, 12)} in ${result.dir} (${result.hubBytes} bytes from the hub, ${result.peerBytes} from peers)\n`);
      } catch (err) {
        bar?.stop();
        if (err instanceof StoreError) throw new CliError(err.message, 1);
        throw err;
      } finally {
        await store.close();
      }
    });
}
