/**
 * Weights sharing on a daemon: the data-plane server (weights-server.ts) behind a secret that only
 * pod members get (handed out over `/orchard/weights/1`, control.ts), the hub ledger when this node
 * is the pod's coordinator, and the store's view of the pod (PodAccess) built on both.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { StreamEncryption } from '@orchard/transport';
import type { OrchardNode } from '../../node/create-node.js';
import { chunkCount, chunkSizeFor, fromRuns, toRuns } from '../chunked/layout.js';
import type { HubRepo } from '../hub.js';
import { HubLedger, type ClaimAnswer } from '../pod/hub-ledger.js';
import type { ModelStore, PodAccess } from '../store.js';
import type { z } from 'zod';
import { askWeightsControl, claimAnswerSchema, haveAnswerSchema, listingAnswerSchema, serveWeightsControl, WEIGHTS_CONTROL_PROTOCOL, type ControlRequest } from './control.js';
import { gossipAddresses } from './addresses.js';
import { podAccess } from './pod-access.js';
import { startWeightsServer } from './weights-server.js';

export interface WeightsServiceOptions {
  node: OrchardNode;
  store: ModelStore;
  selfId: string;
  /** Live peers of the pod, this node excluded. */
  livePeers(): string[];
  /** The pod's coordinator (it keeps the hub ledger). */
  coordinator(): string | undefined;
  /** Addresses peers may reach this node's weights server at. @default every IPv4 address, loopback last */
  hosts?: () => string[];
  /** @default 0 (any free port) */
  port?: number;
  /** Told about every chunk this node serves. */
  onServed?: (remote: string, bytes: number) => void;
  /** How often this node gossips its libp2p addresses (peers known only through gossip need them). @default 5000 */
  announceMs?: number;
  /**
   * Which weights links this node wants encrypted, asked per connection (the data plane's rule:
   * every link but a direct cable, runner/link-security.ts). @default never
   */
  encryption?: () => StreamEncryption;
}

export interface WeightsService {
  pod: PodAccess;
  port: number;
  close(): Promise<void>;
}

/** This node's IPv4 addresses, loopback last (used only when nothing else connects). */
export function weightsHosts(): string[] {
  const out: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) out.push(a.address);
  return [...out.slice(0, 15), '127.0.0.1'];
}

export async function startWeightsService(o: WeightsServiceOptions): Promise<WeightsService> {
  const secret = randomBytes(32);
  const registry = o.store.chunks;
  const server = await startWeightsServer({ secret, registry, port: o.port, onServed: o.onServed, encryption: o.encryption });
  const hosts = o.hosts ?? weightsHosts;
  const ledger = new HubLedger();
  const live = (n: string) => n === o.selfId || o.livePeers().includes(n);
  const limitFor = (size: number) => chunkCount(size, chunkSizeFor(size));

  await serveWeightsControl(o.node, {
    async have(key) {
      const f = await registry.lookup(key);
      if (!f) return undefined;
      return { availability: registry.availability(f), endpoints: hosts().map((host) => ({ host, port: server.port })), secret: secret.toString('base64') };
    },
    async claim(from, req) {
      if (o.coordinator() !== o.selfId) return undefined;
      ledger.prune(live);
      const a = ledger.claim(req.key, fromRuns(req.chunks, limitFor(req.size)), from, { failed: req.failed, live });
      return { granted: toRuns(a.granted), elsewhere: [...a.elsewhere].map(([node, chunks]) => ({ node, chunks: toRuns(chunks) })) };
    },
    async listing(repo) {
      const m = await o.store.readManifest(repo).catch(() => undefined);
      // A model: a Hugging Face directory, or a GGUF repo's .gguf (fetched whole by a stage: no byte ranges for GGUF yet).
      if (!m || !(m.files['config.json'] || Object.keys(m.files).some((p) => p.toLowerCase().endsWith('.gguf')))) return undefined;
      return { repo, commit: m.commit, files: Object.entries(m.files).map(([path, f]) => ({ path, size: f.size, sha256: f.sha256, gitSha1: f.gitSha1 })) } satisfies HubRepo;
    },
  });

  const addresses = gossipAddresses(o.node, o.announceMs ?? 5000);
  const ask = async <T>(peer: string, req: ControlRequest, schema: z.ZodType<T>, signal?: AbortSignal) => {
    await addresses.reach(peer);
    return askWeightsControl(o.node, peer, req, schema, signal);
  };
  const pod = podAccess({
    peers: o.livePeers,
    encryption: o.encryption,
    have: (peer, key, signal) => ask(peer, { op: 'have', key }, haveAnswerSchema, signal),
    listing: async (peer, repo, signal) => (await ask(peer, { op: 'listing', repo }, listingAnswerSchema, signal))?.listing,
    async claim(key, size, chunks, failed, signal): Promise<ClaimAnswer> {
      const coordinator = o.coordinator();
      if (!coordinator) throw new Error('the pod has no coordinator');
      if (coordinator === o.selfId) {
        ledger.prune(live);
        return ledger.claim(key, chunks, o.selfId, { failed, live });
      }
      const a = await ask(coordinator, { op: 'claim', key, size, chunks: toRuns(chunks), failed }, claimAnswerSchema, signal);
      if (!a) throw new Error(`the coordinator ${coordinator} does not keep the hub ledger (yet)`);
      return { granted: fromRuns(a.granted, limitFor(size)), elsewhere: new Map(a.elsewhere.map((e) => [e.node, fromRuns(e.chunks, limitFor(size))])) };
    },
  });

  return {
    pod,
    port: server.port,
    close: async () => {
      addresses.stop();
      await o.node.unhandle(WEIGHTS_CONTROL_PROTOCOL).catch(() => undefined);
      await server.close();
    },
  };
}
