/**
 * The store's view of the pod (PodAccess) over any way of asking peers (PodTransport): libp2p in a
 * daemon (weights-service.ts), direct calls in tests. Bytes always move over the weights data plane.
 */
import type { StreamEncryption } from '@orchard/transport';
import type { ClaimAnswer } from '../pod/hub-ledger.js';
import type { PeerHandle, PodRoute } from '../pod/fetch-file.js';
import type { HubRepo } from '../hub.js';
import type { PodAccess } from '../store.js';
import type { HaveAnswer } from './control.js';
import { WeightsLink } from './weights-link.js';

export interface PodTransport {
  /** Live peers, this node excluded. */
  peers(): string[];
  have(peer: string, key: string, signal?: AbortSignal): Promise<HaveAnswer | undefined>;
  /** The hub ledger's answer for this node (from the coordinator, wherever it is). */
  claim(key: string, size: number, chunks: number[], failed: string[], signal?: AbortSignal): Promise<ClaimAnswer>;
  listing(peer: string, repo: string, signal?: AbortSignal): Promise<HubRepo | undefined>;
  /** Whether this node wants a weights link encrypted (the server may ask too). @default never */
  encryption?(): StreamEncryption;
}

const isLoopback = (host: string) => /^127\./.test(host);
/** After the first link to a peer connects, how long the other addresses may take to join it. */
const LINK_GRACE_MS = 250;

/**
 * One link per path to a peer: every advertised address is tried; links leaving from the same local
 * address share a cable, so only the first of them is kept. Loopback only when nothing else works.
 */
export async function connectLinks(endpoints: HaveAnswer['endpoints'], secret: Uint8Array, signal: AbortSignal, encryption?: StreamEncryption): Promise<WeightsLink[]> {
  const attempt = (list: HaveAnswer['endpoints']) =>
    new Promise<WeightsLink[]>((resolve) => {
      const byPath = new Map<string, WeightsLink>();
      let pending = list.length;
      let done = false;
      let grace: NodeJS.Timeout | undefined;
      const finish = () => {
        if (done) return;
        done = true;
        clearTimeout(grace);
        resolve([...byPath.values()]);
      };
      if (pending === 0) return finish();
      for (const e of list) {
        WeightsLink.connect({ host: e.host, port: e.port, secret, connectTimeoutMs: 3000, signal, encryption })
          .then((link) => {
            // Late (past the grace period) or a second link over the same path: not used.
            if (done || byPath.has(link.localAddress)) return link.close('not needed');
            byPath.set(link.localAddress, link);
            // Cables of one machine answer within moments of each other; an address that does not
            // answer soon (another network, a firewall) does not hold up the download.
            grace ??= setTimeout(finish, LINK_GRACE_MS);
          })
          .catch(() => undefined)
          .finally(() => {
            if (--pending === 0) finish();
          });
      }
    });
  const links = await attempt(endpoints.filter((e) => !isLoopback(e.host)));
  return links.length ? links : attempt(endpoints.filter((e) => isLoopback(e.host)));
}

export function podAccess(t: PodTransport): PodAccess {
  const handle = async (peer: string, key: string, signal?: AbortSignal): Promise<PeerHandle | undefined> => {
    const a = await t.have(peer, key, signal).catch(() => undefined);
    if (!a) return undefined;
    const secret = Buffer.from(a.secret, 'base64');
    return { id: peer, availability: a.availability, links: (s) => connectLinks(a.endpoints, secret, s, t.encryption?.()) };
  };
  return {
    async holders(key, signal) {
      const all = await Promise.all(t.peers().map((p) => handle(p, key, signal)));
      return all.filter((h): h is PeerHandle => !!h && (h.availability.verified.length > 0 || h.availability.fetching.length > 0));
    },
    route(key, size, signal): PodRoute {
      return {
        peer: (id) => handle(id, key, signal),
        claim: (chunks, failed) => t.claim(key, size, chunks, failed, signal),
      };
    },
    async listing(repo, signal) {
      for (const p of t.peers()) {
        const l = await t.listing(p, repo, signal).catch(() => undefined);
        if (l) return l;
      }
      return undefined;
    },
  };
}
