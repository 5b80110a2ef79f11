import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import { InfeasibleError, InputError, type Plan, gb, parseCluster, plan } from '@orchard/partitioner';
import { existsSync } from 'node:fs';
import { describeModel, engineCapabilities } from '../../models/describe.js';
import { describeHubModel } from '../../models/describe-hub.js';
import { HubClient } from '../../store/hub.js';
import { cliSettings } from '../../config/cli.js';
import { StoreError } from '../../store/errors.js';
import { expandShortName } from '../catalog.js';
import { servingProfile } from '../../serving/profile.js';
import { CliError } from '../errors.js';
import { getJson } from '../client.js';
import { MACHINES, MachineError, machineCluster, parseMachines } from '../../models/machines.js';

/**
 * `orchard plan [MODEL] --model PATH|ORG/NAME --cluster FILE|--machine NAME... [--bits B] [--context N] [--prompt-tokens N] [--json]`:
 * runs the planner on a model (local files, or a hub repo's config and safetensors headers alone,
 * HF_ENDPOINT honoured) and a cluster file, or named Macs (models/machines.ts) joined by Thunderbolt 5
 * TCP, and prints the plan. Bad input and impossible requests exit 2 (with `{"error": ...}` under
 * --json); with --machine the answer says whether it fits (`fits`, `machines` added to the JSON).
 */
export function registerPlan(program: Command): void {
  program
    .command('plan')
    .description('choose how to split a model over the cluster (single, pipeline, tensor, hybrid) and predict its speed')
    .argument('[model]', 'the same as --model')
    .option('--model <path>', 'config.json, a directory holding one (safetensors headers there give exact sizes), a GGUF file, or a hub repo ORG/NAME or short name (its config and headers are fetched, no weights)')
    .option('--cluster <file>', "cluster JSON (as printed by 'orchard cluster --json'); without it and --machine, the running pod's (--url)")
    .option('--url <url>', 'the daemon whose pod is planned for when neither --cluster nor --machine is given', cliSettings().url)
    .option('--token <token>', 'API token for that daemon (or ORCHARD_API_TOKEN)')
    .option(
      '--machine <name>',
      `plan for named Macs instead of a cluster file, joined by Thunderbolt 5 (TCP); repeat it, or NAMExN for N alike (m4-max-128x2). Known: ${MACHINES.map((m) => m.name).join(', ')}`,
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--bits <b>', 'plan as if weights were quantized to B bits (MLX-style, group 64)')
    .option('--context <n>', "context length to reserve KV cache for (default: the serving profile's, 4096 or the model's maximum if smaller)")
    .option('--prompt-tokens <n>', 'prompt length for the time-to-first-token prediction (default 512, or the context minus one if smaller)')
    .option('--sequences <n>', 'sequences decoded together (default 1)')
    .option('--json', 'print the plan as JSON (stable contract)')
    .action(async (positional: string | undefined, flags: Omit<PlanFlags, 'model'> & { model?: string; json?: boolean }) => {
      const opts = { ...flags, model: flags.model ?? positional ?? '' };
      try {
        if (!opts.model) throw new CliError('plan: name a model (orchard plan MODEL, or --model PATH|ORG/NAME)', 2);
        if (opts.cluster !== undefined && opts.machine !== undefined) throw new CliError('plan: give either --cluster FILE or --machine NAME (e.g. --machine m4-max-128), not both', 2);
        // Neither: the pod this machine's daemon sees, as `orchard cluster --json` prints it.
        const pod = opts.cluster === undefined && opts.machine === undefined ? await podCluster(opts.url, opts.token) : undefined;
        const result = await makePlan({ ...opts, podCluster: pod });
        const answers = opts.machine !== undefined || pod !== undefined;
        const where = opts.machine ? machineList(opts.machine) : `this pod (${opts.url})`;
        const out = opts.machine ? { ...result, fits: true, machines: opts.machine } : pod ? { ...result, fits: true } : result;
        process.stdout.write(opts.json ? `${JSON.stringify(out, null, 2)}\n` : (answers ? `fits: yes, on ${where}\n` : '') + render(result));
      } catch (err) {
        let message = describe(err, opts);
        if (message === undefined) throw err;
        // With --machine or the running pod, "does not fit" is an answer: the JSON says so next to the error.
        const doesNotFit = opts.cluster === undefined && err instanceof InfeasibleError;
        if (doesNotFit) message = `does not fit on ${opts.machine ? machineList(opts.machine) : `this pod (${opts.url})`}: ${message}`;
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ error: message, ...(doesNotFit ? { fits: false, ...(opts.machine ? { machines: opts.machine } : {}) } : {}) })}\n`);
          process.exitCode = 2;
          return;
        }
        throw new CliError(message, 2);
      }
    });
}

export interface PlanFlags {
  model: string;
  /** A cluster JSON file; or else `machine`. */
  cluster?: string;
  /** Named Macs (models/machines.ts), NAME or NAMExN. */
  machine?: string[];
  /** The running pod's cluster JSON (`GET /api/cluster`), used when neither of the above is given. */
  podCluster?: unknown;
  url?: string;
  token?: string;
  bits?: string;
  context?: string;
  promptTokens?: string;
  sequences?: string;
}

const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/;

/** The same description, serving profile and engine capabilities the daemon plans with. */
export async function makePlan(opts: PlanFlags): Promise<Plan> {
  const bits = opts.bits === undefined ? undefined : number(opts.bits, '--bits', false);
  // A path that exists is read here; otherwise a short name or ORG/NAME is described from the hub.
  const [repo, quant] = expandShortName(opts.model).split(':');
  const fromHub = !existsSync(opts.model) && HUB_ID.test(repo);
  const model = fromHub ? await describeHubModel(repo, { hub: new HubClient(cliSettings().hub), bits, quant }) : await describeModel(opts.model, { bits });
  const profile = servingProfile(model, { context: opts.context === undefined ? undefined : number(opts.context, '--context', true) });
  const request = {
    // An explicit --context is planned as asked, even past the model's trained maximum.
    contextTokens: opts.context === undefined ? profile.contextTokens : number(opts.context, '--context', true),
    promptTokens: opts.promptTokens === undefined ? profile.promptTokens : number(opts.promptTokens, '--prompt-tokens', true),
    sequences: opts.sequences === undefined ? profile.sequences : number(opts.sequences, '--sequences', true),
  };
  const cluster = opts.machine ? machineCluster(parseMachines(opts.machine)) : parseCluster(opts.podCluster ?? (await readJson(opts.cluster ?? '')));
  const result = plan(model.spec, cluster, request, engineCapabilities(model));
  if (model.unsupported) result.explanation.push(`Sizing only: ${model.unsupported}.`);
  return result;
}

/** The running daemon's view of its pod; a daemon that does not answer is named with what to do instead. */
async function podCluster(url: string | undefined, token: string | undefined): Promise<unknown> {
  const base = url ?? cliSettings().url;
  try {
    return await getJson(base, '/api/cluster', { token });
  } catch (err) {
    if (err instanceof CliError) throw new CliError(`plan: ${err.message}; or plan without a pod: --machine NAME (e.g. m4-max-128) or --cluster FILE`, 2);
    throw err;
  }
}

/** A one-line message for errors the user can fix; undefined for bugs. */
function describe(err: unknown, opts: { cluster?: string }): string | undefined {
  if (err instanceof InputError) {
    if (err.source === 'cluster') return `cluster file ${opts.cluster}: ${err.field} ${err.problem}`;
    return err.message;
  }
  if (err instanceof InfeasibleError || err instanceof CliError || err instanceof MachineError || err instanceof ModelFormatError || err instanceof UnsupportedModelError || err instanceof StoreError) return err.message;
  return undefined;
}

async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new CliError(`cluster file ${file} cannot be read`, 2);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`cluster file ${file} is not valid JSON (${(err as Error).message})`, 2);
  }
}

/** "2x m4-max-128 + m4-pro-64 (Thunderbolt 5, TCP)". */
function machineList(values: string[]): string {
  let machines: string[];
  try {
    machines = parseMachines(values).map((m) => m.name);
  } catch {
    return values.join(', ');
  }
  const counts = new Map<string, number>();
  for (const m of machines) counts.set(m, (counts.get(m) ?? 0) + 1);
  const list = [...counts].map(([m, n]) => (n > 1 ? `${n}x ${m}` : m)).join(' + ');
  return machines.length > 1 ? `${list} (Thunderbolt 5, TCP)` : list;
}

function number(text: string, flag: string, integer: boolean): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new CliError(`${flag} must be a positive ${integer ? 'integer' : 'number'}, got "${text}"`, 2);
  }
  return n;
}

function render(p: Plan): string {
  const lines: string[] = [];
  lines.push(`strategy: ${p.strategy}    decode ${p.predicted.decodeTokensPerSecond} tok/s    prefill ${p.predicted.prefillTokensPerSecond} tok/s    TTFT ${p.predicted.ttftMs} ms (${p.request.promptTokens}-token prompt)`);
  lines.push('');
  const rows = [['stage', 'nodes', 'layers', 'tp', 'heads', 'transport', 'hop out']];
  p.stages.forEach((s, i) =>
    rows.push([String(i), s.nodes.join(', '), `${s.layers[0]}-${s.layers[1] - 1}`, String(s.tensorParallel), s.heads.join('/'), s.transport, s.hopTransport ?? '-']),
  );
  lines.push(...table(rows));
  lines.push('');
  const mem = [['node', 'weights', 'kv cache', 'workspace', 'headroom', 'total', 'available']];
  for (const [id, m] of Object.entries(p.memory)) mem.push([id, gb(m.weightsBytes), gb(m.kvCacheBytes), gb(m.workspaceBytes), gb(m.headroomBytes), gb(m.totalBytes), gb(m.availableBytes)]);
  lines.push(...table(mem));
  lines.push('');
  lines.push(...p.explanation);
  if (p.alternatives.length > 0) {
    lines.push('', 'alternatives:');
    for (const a of p.alternatives) {
      const speed = a.predicted ? `${a.predicted.decodeTokensPerSecond} tok/s` : 'n/a';
      lines.push(`  ${a.strategy.padEnd(9)} ${(a.nodes.join('+') || '-').padEnd(40)} ${speed.padStart(12)}  ${a.rejected}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join('  ').trimEnd());
}
