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

export const DEFAULT_API_PORT = 52415;
export const DEFAULT_LISTEN = ['/ip4/0.0.0.0/tcp/52416'];

export interface DaemonOptions {
  dataDir: string;
  listen: string[];
  bootstrap: string[];
  apiHost: string;
  apiPort: number;
  apiToken: string | null;
  clusterKeyFile: string | null;
  name: string;
  /** Seconds of silence before a node is marked gone. */
  goneAfterSec: number;
  heartbeatMs: number;
  probePort: number;
  mdns: boolean;
  rebench: boolean;
  logLevel: string;
  configFile: string | null;
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
export type RawOptions = Partial<Record<keyof DaemonOptions | 'config' | 'clusterKey', unknown>>;

const KEYS = ['dataDir', 'listen', 'bootstrap', 'apiHost', 'apiPort', 'apiToken', 'clusterKey', 'name', 'goneAfter', 'heartbeatMs', 'probePort', 'mdns', 'logLevel', 'dataPlaneEncryption', 'dataPlaneCipher'] as const;
type Key = (typeof KEYS)[number];

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (k: string) => `ORCHARD_${kebab(k).replace(/-/g, '_').toUpperCase()}`;

function list(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) return v.map(String).flatMap((s) => s.split(/[\s,]+/)).filter(Boolean);
  return String(v).split(/[\s,]+/).filter(Boolean);
}

export class OptionsError extends Error {}

function fromEnv(env: NodeJS.ProcessEnv): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  for (const k of KEYS) {
    const v = env[envName(k)];
    if (v !== undefined && v !== '') out[k] = v;
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

export function resolveOptions(flags: RawOptions, env: NodeJS.ProcessEnv = process.env): DaemonOptions {
  const envVals = fromEnv(env);
  const dataDir = resolve(String(flags.dataDir ?? envVals.dataDir ?? join(os.homedir(), '.orchard')));
  const configFile = (flags.config as string | undefined) ?? env.ORCHARD_CONFIG ?? (existsSync(join(dataDir, 'config.json')) ? join(dataDir, 'config.json') : undefined);
  const file = configFile ? fromFile(configFile) : {};
  const pick = (k: Key): unknown => (flags as Record<string, unknown>)[k === 'goneAfter' ? 'goneAfter' : k] ?? envVals[k] ?? file[k];

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
  const mdnsRaw = pick('mdns');
  const clusterKey = pick('clusterKey') as string | undefined;
  return {
    dataDir,
    listen: list(pick('listen')) ?? DEFAULT_LISTEN,
    bootstrap: list(pick('bootstrap')) ?? [],
    apiHost,
    apiPort,
    apiToken,
    clusterKeyFile: clusterKey ? resolve(clusterKey) : null,
    name: String(pick('name') ?? os.hostname()),
    goneAfterSec,
    heartbeatMs,
    probePort,
    mdns: !(mdnsRaw === false || mdnsRaw === 'false' || mdnsRaw === '0'),
    rebench: Boolean(flags.rebench),
    logLevel: String(pick('logLevel') ?? 'info'),
    configFile: configFile ?? null,
    dataPlaneEncryption,
    dataPlaneCipher,
  };
}
