/**
 * `orchard start` settings from, in order of precedence: command-line flags, environment variables
 * (ORCHARD_<NAME>, e.g. ORCHARD_API_PORT), a JSON config file (--config, ORCHARD_CONFIG or
 * <data-dir>/config.json, keys spelled like the flags: "api-port" or "apiPort"), then defaults.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { isLoopbackHost } from './addresses.js';
import { hubSettings } from './hub.js';
import { BACKEND_NAMES, isBackendName, type BackendName } from '../backend/select.js';
import { DEFAULT_NETWORK_LISTEN, parseNetworkName, parseRegion, type NetworkOptions } from '../network/settings.js';

export const DEFAULT_API_PORT = 52415;
export const DEFAULT_LISTEN = ['/ip4/0.0.0.0/tcp/52416'];

export interface DaemonOptions {
  dataDir: string;
  listen: string[];
  bootstrap: string[];
  apiHost: string;
  apiPort: number;
  apiToken: string | null;
  /** More Host names the API answers to (behind a proxy, a DNS name), besides loopback and --api-host. */
  apiAllowedHosts: string[];
  /** Browser origins allowed besides the dashboard's own and localhost ('*': any). */
  corsOrigins: string[];
  clusterKeyFile: string | null;
  name: string;
  /** Seconds of silence before a node is marked gone. */
  goneAfterSec: number;
  heartbeatMs: number;
  probePort: number;
  mdns: boolean;
  rebench: boolean;
  logLevel: string;
  /** Console log lines: pretty on a terminal, JSON otherwise (`auto`), as asked, or none (the service: the file has them). */
  logFormat: 'auto' | 'pretty' | 'json' | 'none';
  /** The JSON log file `orchard logs` reads (rotated by size); null: none. */
  logFile: string | null;
  configFile: string | null;
  /** What runners compute on (`--backend`). */
  backend: BackendName;
  /** gpu/auto may use a software adapter such as lavapipe. */
  allowSoftwareGpu: boolean;
  /** Kernel threads per runner; null: the cores divided among this node's ranks. */
  engineThreads: number | null;
  /** Requests waiting per instance before 429. */
  maxQueue: number;
  /** Sequences an instance decodes together in one step (`--batch`), split or not. */
  batch: number;
  /** Bytes of KV blocks an instance keeps for prompt-prefix reuse (`--prefix-cache 64MiB`; 0: none); a split one on every rank, sized by its driver. */
  prefixCacheBytes: number;
  /**
   * How an instance speculates for requests that do not say (`--speculate prompt-lookup|draft|mtp|off`), GPU
   * ranks included (mtp: the checkpoint's multi-token-prediction layer, one-rank CPU instances only).
   */
  speculate: 'prompt-lookup' | 'draft' | 'mtp' | 'off';
  /** The small model (HF directory or GGUF, same tokenizer) an instance's driving runner drafts with (`--draft-model`); null: none. */
  draftModel: string | null;
  /** Context (tokens per sequence) instances serve unless a load asks for another; null: the serving profile's default. */
  context: number | null;
  /** Where the bundled demo model lives. */
  demoModelDir: string | null;
  /** Runners poll their event loop this long inside a data-plane wait, ms (0: never). */
  dataPlanePollMs: number;
  /** Unload an instance after this long without requests, ms (`--keep-alive 30m`); null: never. */
  keepAliveMs: number | null;
  /** Test only: runners use the simulated RDMA verbs with these settings (ORCHARD_RDMA_SIM). */
  rdmaSim: string | null;
  /** The Hugging Face hub (HF_ENDPOINT) and token (HF_TOKEN / HUGGING_FACE_HUB_TOKEN). */
  hfEndpoint: string;
  hfToken: string | null;
  /** The wide-area network this node joined (`--network NAME`); null: none, and no wide-area node runs. */
  network: NetworkOptions | null;
  /**
   * Which data-plane links are encrypted: auto = every link but a direct cable (Thunderbolt) or
   * this machine itself; always; never (this node asks for none; a peer may still ask).
   */
  dataPlaneEncryption: DataPlaneEncryption;
  /** Cipher this node proposes: auto = the faster on this machine (measured by each runner). */
  dataPlaneCipher: DataPlaneCipher;
}

export const DATA_PLANE_ENCRYPTION = ['auto', 'always', 'never'] as const;
export type DataPlaneEncryption = (typeof DATA_PLANE_ENCRYPTION)[number];
export const DATA_PLANE_CIPHERS = ['auto', 'aes-256-gcm', 'chacha20-poly1305'] as const;
export type DataPlaneCipher = (typeof DATA_PLANE_CIPHERS)[number];

/** Raw values as strings/arrays, before validation. Keys are the flag names in camelCase. */
export type RawOptions = Partial<Record<keyof DaemonOptions | (typeof KEYS)[number] | 'config', unknown>>;

const KEYS = [
  'dataDir',
  'listen',
  'bootstrap',
  'apiHost',
  'apiPort',
  'apiToken',
  'apiAllowedHosts',
  'corsOrigins',
  'clusterKey',
  'name',
  'goneAfter',
  'heartbeatMs',
  'probePort',
  'mdns',
  'logLevel',
  'logFormat',
  'logFile',
  'backend',
  'allowSoftwareGpu',
  'engineThreads',
  'maxQueue',
  'context',
  'demoModelDir',
  'dataPlanePollMs',
  'rdmaSim',
  'keepAlive',
  'batch',
  'prefixCache',
  'speculate',
  'draftModel',
  'dataPlaneEncryption',
  'dataPlaneCipher',
  'network',
  'networkBootstrap',
  'networkListen',
  'networkAnnounce',
  'networkPrivateAddresses',
  'networkRegion',
  'networkRoute',
  'networkMaxPrice',
  'networkTrusted',
] as const;
type Key = (typeof KEYS)[number];

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (k: string) => `ORCHARD_${kebab(k).replace(/-/g, '_').toUpperCase()}`;

function list(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) return v.map(String).flatMap((s) => s.split(/[\s,]+/)).filter(Boolean);
  return String(v).split(/[\s,]+/).filter(Boolean);
}

export class OptionsError extends Error {}

const UNITS: Record<string, number> = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30 };

/** "64MiB", "1.5GB", "0" → bytes; anything else names the setting and the forms it takes. */
function byteSize(v: unknown, name: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(String(v));
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new OptionsError(`${name} must be a size such as 64MiB, 512MB, 2GiB or 0, got ${JSON.stringify(v)}`);
  return Math.round(Number(m[1]) * unit);
}

/** Settings whose environment variable is not ORCHARD_<FLAG>. */
const ENV_NAMES: Partial<Record<Key, string[]>> = { backend: ['ORCHARD_ENGINE_BACKEND', 'ORCHARD_BACKEND'] };

function fromEnv(env: NodeJS.ProcessEnv): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  for (const k of KEYS) {
    const name = (ENV_NAMES[k] ?? [envName(k)]).find((n) => env[n] !== undefined && env[n] !== '');
    if (name) out[k] = env[name];
  }
  return out;
}

function fromFile(path: string): Partial<Record<Key, unknown>> {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new OptionsError(`config file ${path}: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new OptionsError(`config file ${path}: expected a JSON object`);
  const out: Partial<Record<Key, unknown>> = {};
  for (const [k, v] of Object.entries(doc)) {
    const key = KEYS.find((x) => x === k || kebab(x) === k);
    if (!key) throw new OptionsError(`config file ${path}: unknown setting "${k}" (known: ${KEYS.map(kebab).join(', ')})`);
    out[key] = v;
  }
  return out;
}

const portSchema = (what: string) =>
  z.coerce.number({ error: `${what} must be a number` }).int(`${what} must be an integer`).min(0, `${what} must be 0..65535`).max(65535, `${what} must be 0..65535`);

/** `--log-file none` (or an empty value) turns the file off; the default lives in the data dir. */
function logFileOf(v: unknown, dataDir: string): string | null {
  if (v === undefined || v === null) return join(dataDir, 'logs', 'orchard.log');
  const s = String(v);
  return s === '' || s === 'none' ? null : resolve(s);
}

/**
 * A duration as Ollama's keep_alive takes it: `30m`, `1h`, `90s`, `500ms`, a number of seconds, or
 * `never` / a negative number for never. Null means never.
 */
export function durationMs(v: unknown, what: string): number | null {
  const text = String(v).trim().toLowerCase();
  if (text === 'never' || /^-\d/.test(text)) return null;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text);
  if (!m) throw new OptionsError(`${what} must be a duration such as 30m, 1h, 90s or never, got ${JSON.stringify(v)}`);
  return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h']);
}

export function resolveOptions(flags: RawOptions, env: NodeJS.ProcessEnv = process.env): DaemonOptions {
  const envVals = fromEnv(env);
  const hub = hubSettings(env);
  const dataDir = resolve(String(flags.dataDir ?? envVals.dataDir ?? join(os.homedir(), '.orchard')));
  const configFile = (flags.config as string | undefined) ?? env.ORCHARD_CONFIG ?? (existsSync(join(dataDir, 'config.json')) ? join(dataDir, 'config.json') : undefined);
  const file = configFile ? fromFile(configFile) : {};
  const pick = (k: Key): unknown => (flags as Record<string, unknown>)[k] ?? envVals[k] ?? file[k];

  const apiHost = String(pick('apiHost') ?? '127.0.0.1');
  const apiToken = (pick('apiToken') as string | undefined) ?? null;
  const parse = <T>(schema: z.ZodType<T>, v: unknown): T => {
    const r = schema.safeParse(v);
    if (!r.success) throw new OptionsError(r.error.issues[0].message);
    return r.data;
  };
  const apiPort = parse(portSchema('--api-port'), pick('apiPort') ?? DEFAULT_API_PORT);
  const probePort = parse(portSchema('--probe-port'), pick('probePort') ?? 0);
  const goneAfterSec = parse(z.coerce.number({ error: '--gone-after must be a number of seconds' }).min(2, '--gone-after must be at least 2 seconds (heartbeats are 1 s apart)').max(600, '--gone-after must be at most 600 seconds'), pick('goneAfter') ?? 5);
  const heartbeatMs = parse(z.coerce.number().int().min(100).max(10_000), pick('heartbeatMs') ?? 1000);
  const oneOf = <T extends string>(flag: string, values: readonly T[]) => z.enum(values as [T, ...T[]], { error: `${flag} must be one of ${values.join(', ')}` });
  const dataPlaneEncryption = parse(oneOf('--data-plane-encryption', DATA_PLANE_ENCRYPTION), pick('dataPlaneEncryption') ?? 'auto');
  const dataPlaneCipher = parse(oneOf('--data-plane-cipher', DATA_PLANE_CIPHERS), pick('dataPlaneCipher') ?? 'auto');
  if (!isLoopbackHost(apiHost) && !apiToken) {
    throw new OptionsError(`--api-host ${apiHost} is not a loopback address: anyone on the network could use the API, so --api-token (or ORCHARD_API_TOKEN) is required`);
  }
  const backend = String(pick('backend') ?? 'auto').trim();
  if (!isBackendName(backend)) {
    const source = (flags as Record<string, unknown>).backend !== undefined ? '--backend' : envVals.backend !== undefined ? (ENV_NAMES.backend!.find((n) => env[n]) ?? 'ORCHARD_ENGINE_BACKEND') : 'backend';
    throw new OptionsError(`${source} must be one of ${BACKEND_NAMES.join(', ')}, got ${JSON.stringify(backend)}`);
  }
  const threads = pick('engineThreads');
  const engineThreads = threads === undefined ? null : parse(z.coerce.number({ error: '--engine-threads must be a number' }).int('--engine-threads must be an integer').min(1, '--engine-threads must be at least 1').max(256), threads);
  const maxQueue = parse(z.coerce.number({ error: '--max-queue must be a number' }).int('--max-queue must be an integer').min(0, '--max-queue must be 0 or more').max(100_000), pick('maxQueue') ?? 64);
  const contextRaw = pick('context');
  const context = contextRaw === undefined ? null : parse(z.coerce.number({ error: '--context must be a number of tokens' }).int('--context must be a whole number of tokens').min(2, '--context must be at least 2 tokens').max(1 << 24), contextRaw);
  const keepAliveMs = durationMs(pick('keepAlive') ?? '30m', '--keep-alive');
  const batch = parse(z.coerce.number({ error: '--batch must be a number of sequences' }).int('--batch must be a whole number').min(1, '--batch must be at least 1').max(64, '--batch must be at most 64'), pick('batch') ?? 8);
  const prefixCacheBytes = byteSize(pick('prefixCache') ?? '64MiB', '--prefix-cache');
  const speculate = parse(z.enum(['prompt-lookup', 'draft', 'mtp', 'off'], { error: '--speculate must be prompt-lookup, draft, mtp or off' }), String(pick('speculate') ?? 'off').trim());
  const draftRaw = pick('draftModel');
  const draftModel = draftRaw === undefined || String(draftRaw).trim() === '' ? null : resolve(String(draftRaw).trim());
  if (draftModel && !existsSync(draftModel)) throw new OptionsError(`--draft-model ${draftModel}: no such file or directory`);
  if (speculate === 'draft' && !draftModel) throw new OptionsError('--speculate draft needs --draft-model <dir> (or ORCHARD_DRAFT_MODEL): the small model to draft with');
  const dataPlanePollMs = parse(z.coerce.number({ error: 'ORCHARD_DATA_PLANE_POLL_MS must be a number' }).min(0).max(100, 'ORCHARD_DATA_PLANE_POLL_MS must be at most 100'), pick('dataPlanePollMs') ?? 0.25);
  const bool = (v: unknown) => v === true || /^(1|true|yes)$/i.test(String(v ?? ''));
  const network = networkOptions(pick, list, bool);
  const mdnsRaw = pick('mdns');
  const clusterKey = pick('clusterKey') as string | undefined;
  return {
    dataDir,
    listen: list(pick('listen')) ?? DEFAULT_LISTEN,
    bootstrap: list(pick('bootstrap')) ?? [],
    apiHost,
    apiPort,
    apiToken,
    apiAllowedHosts: list(pick('apiAllowedHosts')) ?? [],
    corsOrigins: list(pick('corsOrigins')) ?? [],
    clusterKeyFile: clusterKey ? resolve(clusterKey) : null,
    name: String(pick('name') ?? os.hostname()),
    goneAfterSec,
    heartbeatMs,
    probePort,
    mdns: !(mdnsRaw === false || mdnsRaw === 'false' || mdnsRaw === '0'),
    rebench: Boolean(flags.rebench),
    logLevel: String(pick('logLevel') ?? 'info'),
    logFormat: parse(z.enum(['auto', 'pretty', 'json', 'none'], { error: '--log-format must be auto, pretty, json or none' }), pick('logFormat') ?? 'auto'),
    logFile: logFileOf(pick('logFile'), dataDir),
    configFile: configFile ?? null,
    backend,
    allowSoftwareGpu: bool(pick('allowSoftwareGpu')),
    engineThreads,
    maxQueue,
    batch,
    prefixCacheBytes,
    speculate,
    draftModel,
    context,
    demoModelDir: pick('demoModelDir') === undefined ? null : resolve(String(pick('demoModelDir'))),
    dataPlanePollMs,
    rdmaSim: pick('rdmaSim') === undefined ? null : String(pick('rdmaSim')),
    keepAliveMs,
    hfEndpoint: hub.endpoint,
    hfToken: hub.token,
    dataPlaneEncryption,
    dataPlaneCipher,
    network,
  };
}

/** `--network NAME` and the settings that only mean something with it. */
function networkOptions(pick: (k: Key) => unknown, list: (v: unknown) => string[] | undefined, bool: (v: unknown) => boolean): NetworkOptions | null {
  const name = pick('network');
  const others = KEYS.filter((k) => k.startsWith('network') && k !== 'network' && pick(k) !== undefined);
  if (name === undefined || name === '') {
    if (others.length) throw new OptionsError(`--${kebab(others[0])} needs --network NAME (the network to join)`);
    return null;
  }
  try {
    const maxPrice = pick('networkMaxPrice');
    const price = maxPrice === undefined ? null : Number(maxPrice);
    if (price !== null && (!Number.isInteger(price) || price < 0)) throw new Error(`--network-max-price must be a whole number of credits per 1M tokens, got ${JSON.stringify(maxPrice)}`);
    const route = pick('networkRoute');
    const trusted = list(pick('networkTrusted'));
    return {
      name: parseNetworkName(String(name)),
      bootstrap: list(pick('networkBootstrap')) ?? [],
      listen: list(pick('networkListen')) ?? DEFAULT_NETWORK_LISTEN,
      announce: list(pick('networkAnnounce')) ?? [],
      privateAddresses: bool(pick('networkPrivateAddresses')),
      region: pick('networkRegion') === undefined ? null : parseRegion(String(pick('networkRegion'))),
      route: route === undefined ? true : !(route === false || /^(0|false|no|off)$/i.test(String(route))),
      maxPrice: price,
      trusted: trusted?.length ? trusted : null,
    };
  } catch (err) {
    throw new OptionsError((err as Error).message);
  }
}
