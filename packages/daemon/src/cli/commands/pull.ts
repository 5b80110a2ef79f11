/**
 * `orchard pull ORG/NAME[:QUANT]`: a model from the Hugging Face hub into the store, with per-file and
 * overall bytes, speed and time left; network errors say their real cause.
 */
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { HubClient, ModelStore, StoreError, type PullResult } from '../../store/index.js';
import { cliSettings } from '../../config/cli.js';
import { missingFolders, removeEmptyFolders } from '../empty-dirs.js';
import { CliError } from '../errors.js';
import { expandShortName } from '../catalog.js';
import { paintOut } from '../../colors.js';
import { formatBytes, PullProgress } from '../pull-progress.js';
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

/** `org/name:Q4_K_M` → repo and quantisation. */
export function splitModelRef(ref: string): { repo: string; quant?: string } {
  const i = ref.indexOf(':');
  return i < 0 ? { repo: ref } : { repo: ref.slice(0, i), quant: ref.slice(i + 1) || undefined };
}

export interface PullCliOptions {
  revision?: string;
  dataDir?: string;
  layers?: string;
  embed?: boolean;
  head?: boolean;
  /** Progress to this stream: rewritten in place on a terminal, a line every few seconds otherwise. */
  progressTo?: NodeJS.WritableStream & { isTTY?: boolean };
  quiet?: boolean;
}

/** A pull with its progress on stderr; shared by `orchard pull` and `orchard run/chat MODEL`. */
export async function pullWithProgress(ref: string, opts: PullCliOptions): Promise<PullResult> {
  const { repo, quant } = splitModelRef(ref);
  const store = new ModelStore(opts.dataDir ?? defaultDataDir(), new HubClient(cliSettings().hub));
  // The store makes the model's folder before it asks the hub; a pull that fails before any byte lands
  // must not leave that folder behind (an empty folder reads as a broken model).
  let made: string[] = [];
  try {
    made = missingFolders(store.dirFor(repo), store.root, existsSync);
  } catch {
    // A bad repo id: the pull itself says what is wrong with it.
  }
  const selection = opts.layers ? { layers: parseLayers(opts.layers), embed: !!opts.embed, head: !!opts.head } : undefined;
  const out = opts.progressTo ?? process.stderr;
  const progress = new PullProgress();
  const tty = !!out.isTTY;
  let lastDraw = 0;
  let drawn = false;
  let lastLine = '';
  const draw = (force = false) => {
    if (opts.quiet) return;
    const now = Date.now();
    if (!force && now - lastDraw < (tty ? 100 : 5000)) return;
    lastDraw = now;
    const line = progress.line();
    if (tty) {
      out.write(`\r\x1b[K${line}`);
      drawn = true;
    } else if (line !== lastLine) out.write(`${line}\n`);
    lastLine = line;
  };
  try {
    const result = await store.pull(repo, {
      revision: opts.revision,
      quant,
      selection,
      onPlan: (files) => {
        progress.plan(files);
        if (!opts.quiet) out.write(`${repo}: ${files.length} file${files.length === 1 ? '' : 's'}, ${formatBytes(progress.total)}\n`);
      },
      onProgress: (e) => {
        progress.update(e);
        // A finished file is always shown (off a terminal: one line per file at least).
        draw(e.done >= e.total);
      },
    });
    draw(true);
    if (tty && drawn) out.write('\n');
    return result;
  } catch (err) {
    if (tty && drawn) out.write('\n');
    removeEmptyFolders(made);
    if (err instanceof StoreError) throw new CliError(err.message, 1);
    throw err;
  } finally {
    await store.close();
  }
}

export function registerPull(program: Command): void {
  program
    .command('pull')
    .description('download a model from the Hugging Face hub into the store (honours HF_ENDPOINT and HF_TOKEN)')
    .argument('<repo>', 'ORG/NAME or a short name from `orchard models --available`; or ORG/NAME:QUANT for one GGUF file (e.g. :Q8_0); a GGUF-only repo without :QUANT gets the largest loadable file that fits in memory')
    .option('--revision <rev>', 'branch, tag or commit', 'main')
    .option('--data-dir <dir>', 'data directory (default ~/.orchard)')
    .option('--layers <start:end>', 'fetch only these decoder layers (a pipeline stage)')
    .option('--embed', 'with --layers: also the token embedding')
    .option('--head', 'with --layers: also the final norm and LM head')
    .option('--json', 'print the result as JSON')
    .option('--from-pod', "through the running daemon, from the pod's peers only (no hub)")
    .option('--url <url>', 'with --from-pod: daemon API', cliSettings().url)
    .option('--token <token>', 'with --from-pod: API token (env ORCHARD_API_TOKEN)')
    .action(async (given: string, opts: PullCliOptions & { json?: boolean; fromPod?: boolean; url: string; token?: string }) => {
      const ref = expandShortName(given);
      if (opts.fromPod) {
        if (opts.layers) throw new CliError('--from-pod pulls whole models (a stage is fetched by `orchard load`); drop --layers', 2);
        const { repo, quant } = splitModelRef(ref);
        if (quant) throw new CliError(`--from-pod pulls the model as the pod holds it; drop :${quant}`, 2);
        return pullFromPod(repo, opts);
      }
      const result = await pullWithProgress(ref, { ...opts, quiet: opts.json });
      if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        const from = [result.hubBytes ? `${formatBytes(result.hubBytes)} from the hub` : '', result.peerBytes ? `${formatBytes(result.peerBytes)} from peers` : ''].filter(Boolean).join(', ') || 'everything was already here';
        process.stdout.write(`${paintOut.green('✓')} ${splitModelRef(ref).repo}@${result.commit.slice(0, 12)} in ${result.dir} (${from})\n`);
      }
    });
}
