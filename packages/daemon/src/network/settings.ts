/**
 * The network settings of `orchard start` (read by config/options.ts with the others) and how their
 * text forms parse. Joining is opt-in: without a network name there is no wide-area node at all.
 */
import { networkNameSchema, type Region } from './offer.js';

export const DEFAULT_NETWORK_LISTEN = ['/ip4/0.0.0.0/tcp/52417'];

export interface NetworkOptions {
  name: string;
  bootstrap: string[];
  listen: string[];
  announce: string[];
  /** Keep private addresses in the DHT (a network inside one site, or a test). */
  privateAddresses: boolean;
  region: Region | null;
  /** Send requests for models the pod does not serve to the network. */
  route: boolean;
  /** Highest price paid, credits per 1M tokens; null: any. */
  maxPrice: number | null;
  /** Only these peers get this node's jobs; null: any. */
  trusted: string[] | null;
}

/** "LABEL@LAT,LON", e.g. "Berlin@52.5,13.4"; published rounded to whole degrees. Throws a message naming the setting. */
export function parseRegion(text: string): Region {
  const m = /^(.{1,64})@(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) throw new Error(`--network-region must look like LABEL@LAT,LON (e.g. Berlin@52.5,13.4), got ${JSON.stringify(text)}`);
  const lat = Math.round(Number(m[2]));
  const lon = Math.round(Number(m[3]));
  if (lat < -90 || lat > 90 || lon < -180 || lon > 180) throw new Error(`--network-region: latitude must be -90..90 and longitude -180..180, got ${m[2]},${m[3]}`);
  return { label: m[1].trim(), lat, lon };
}

export function parseNetworkName(text: string): string {
  const r = networkNameSchema.safeParse(text);
  if (!r.success) throw new Error(`--network ${JSON.stringify(text)}: ${r.error.issues[0]?.message}`);
  return r.data;
}
