import type { Command } from 'commander';
import type { LendingPolicy } from '../../network/lending.js';
import { cliSettings } from '../../config/cli.js';
import { CliError } from '../errors.js';
import { call } from './serve-client.js';

interface LendFlags {
  url: string;
  token?: string;
  json?: boolean;
  mode?: string;
  share?: string;
  price?: string;
  maxTokens?: string;
  maxJobs?: string;
  rate?: string;
  models?: string;
  maxModelGb?: string;
  allow?: string;
  deny?: string;
}

const list = (v: string) => v.split(/[\s,]+/).filter(Boolean);

function number(flag: string, v: string | undefined, o: { integer?: boolean } = {}): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || (o.integer && !Number.isInteger(n))) throw new CliError(`${flag} must be ${o.integer ? 'a whole number' : 'a number'}, got ${JSON.stringify(v)}`, 2);
  return n;
}

/** The policy fields the flags name (the daemon validates the whole). */
export function lendingChanges(f: LendFlags): Partial<LendingPolicy> {
  const out: Partial<LendingPolicy> = {};
  if (f.mode !== undefined) {
    if (f.mode !== 'idle' && f.mode !== 'share') throw new CliError(`--mode must be idle or share, got ${JSON.stringify(f.mode)}`, 2);
    out.mode = f.mode;
  }
  const set = <K extends keyof LendingPolicy>(k: K, v: LendingPolicy[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('share', number('--share', f.share));
  set('pricePer1M', number('--price', f.price, { integer: true }));
  set('maxTokensPerJob', number('--max-tokens', f.maxTokens, { integer: true }));
  set('maxConcurrentJobs', number('--max-jobs', f.maxJobs, { integer: true }));
  set('perPeerJobsPerMinute', number('--rate', f.rate, { integer: true }));
  const gb = number('--max-model-gb', f.maxModelGb);
  if (gb !== undefined) out.maxModelBytes = gb > 0 ? Math.round(gb * 2 ** 30) : null;
  if (f.models !== undefined) out.models = f.models === 'all' ? null : list(f.models);
  if (f.allow !== undefined) out.allow = f.allow === 'all' ? null : list(f.allow);
  if (f.deny !== undefined) out.deny = list(f.deny);
  return out;
}

export function describeLending(p: LendingPolicy): string {
  if (!p.enabled) return 'lending: off — this pod takes no jobs from the network\n';
  const lines = [
    `lending: on, ${p.mode === 'idle' ? 'only while nobody here uses the pod' : `up to ${Math.round(p.share * 100)}% of the pod's request slots`}; local requests always come first`,
    `  price ${p.pricePer1M} credits per 1M tokens; at most ${p.maxTokensPerJob} tokens per job, ${p.maxConcurrentJobs} job(s) at once, ${p.perPeerJobsPerMinute} per peer per minute`,
    `  models: ${p.models ? p.models.join(', ') : 'any this pod serves'}${p.maxModelBytes ? ` up to ${(p.maxModelBytes / 2 ** 30).toFixed(1)} GiB` : ''}`,
    `  peers: ${p.allow ? `only ${p.allow.join(', ')}` : 'any'}${p.deny.length ? `; never ${p.deny.join(', ')}` : ''}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** `orchard lend [on|off|status]`: lend this pod's idle time to the network, with limits. */
export function registerLend(program: Command): void {
  program
    .command('lend')
    .description("lend this pod's idle time to the network it joined, for credits (off until turned on)")
    .argument('[action]', 'on, off or status', 'status')
    .option('--mode <mode>', 'idle: only while nobody here uses the pod; share: up to --share of its request slots')
    .option('--share <fraction>', 'share of the request slots lent in share mode, 0..1')
    .option('--price <credits>', 'credits asked per 1M tokens')
    .option('--max-tokens <n>', 'most tokens per job')
    .option('--max-jobs <n>', 'most network jobs at once')
    .option('--rate <n>', 'most jobs one peer may start per minute')
    .option('--models <list>', 'models lent (comma-separated, or "all")')
    .option('--max-model-gb <gb>', 'lend only models up to this size (0: no limit)')
    .option('--allow <peers>', 'only these peer ids may use the pod (comma-separated, or "all")')
    .option('--deny <peers>', 'these peer ids may never use the pod (comma-separated; empty to clear)')
    .option('--json', 'print the policy as JSON')
    .option('--url <url>', 'daemon API', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (action: string, flags: LendFlags) => {
      if (!['on', 'off', 'status'].includes(action)) throw new CliError(`orchard lend: expected on, off or status, got ${JSON.stringify(action)}`, 2);
      const changes = lendingChanges(flags);
      let policy: LendingPolicy;
      if (action === 'status' && Object.keys(changes).length === 0) {
        policy = (await (await call(flags, 'GET', '/api/network/lending', undefined, 10_000)).json()) as LendingPolicy;
      } else {
        const body = { ...changes, ...(action === 'status' ? {} : { enabled: action === 'on' }) };
        policy = (await (await call(flags, 'PUT', '/api/network/lending', body, 10_000)).json()) as LendingPolicy;
      }
      process.stdout.write(flags.json ? `${JSON.stringify(policy, null, 2)}\n` : describeLending(policy));
    });
}
