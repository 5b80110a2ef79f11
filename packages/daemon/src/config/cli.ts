/**
 * The settings of the `orchard` client commands (everything but `orchard start`, whose settings are
 * `options.ts`'s), read from the environment in one place: which daemon to talk to and with what
 * token, where the data dir is, which hub to pull from. Flags win over these (commander takes them
 * as option defaults). Read at the moment a command is built or run, so a caller that changes the
 * environment between two in-process runs (the tests) sees the new values.
 */
import os from 'node:os';
import { join, resolve } from 'node:path';
import { hubSettings, type HubSettings } from './hub.js';
import { DEFAULT_API_PORT } from './options.js';

/** The daemon API a client command talks to unless --url or ORCHARD_URL says otherwise. */
export const DEFAULT_URL = `http://127.0.0.1:${DEFAULT_API_PORT}`;

export interface CliSettings {
  /** ORCHARD_URL, else the local daemon's default address. */
  url: string;
  /** ORCHARD_API_TOKEN; --token wins. */
  apiToken: string | undefined;
  /** ORCHARD_DATA_DIR, else ~/.orchard (absolute). */
  dataDir: string;
  hub: HubSettings;
  /** What a leading `~/` in a model path stands for (HOME); '~' when unset, so the path stays as typed. */
  home: string;
  /** ORCHARD_DEBUG: print the stack of an unexpected error. */
  debug: boolean;
  /** PATH, written into the service definition so the service finds the same tools. */
  path: string | undefined;
}

export function cliSettings(env: NodeJS.ProcessEnv = process.env): CliSettings {
  return {
    url: env.ORCHARD_URL ?? DEFAULT_URL,
    apiToken: env.ORCHARD_API_TOKEN,
    dataDir: resolve(env.ORCHARD_DATA_DIR ?? join(os.homedir(), '.orchard')),
    hub: hubSettings(env),
    home: env.HOME ?? '~',
    debug: !!env.ORCHARD_DEBUG,
    path: env.PATH,
  };
}
