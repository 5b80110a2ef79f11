/**
 * A pod of stores in one process, for tests of weights sharing without libp2p: each node has its
 * own store and weights server on 127.0.0.1 (the real data plane), peers ask each other directly
 * instead of over /orchard/weights/1, and one shared hub ledger plays the coordinator's.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { HubClient, ModelStore, type PodAccess } from '../../src/store/index.js';
import { HubLedger } from '../../src/store/pod/hub-ledger.js';
import { podAccess } from '../../src/store/peers/pod-access.js';
import { startWeightsServer, type WeightsServer } from '../../src/store/peers/weights-server.js';

export interface LocalNode {
  id: string;
  store: ModelStore;
  server: WeightsServer;
  pod: PodAccess;
  alive: boolean;
  /** Chunks this node's server has sent. */
  served: number;
  /** Called after each chunk this node serves (tests kill a node mid-transfer from here). */
  onServed?: (served: number) => void;
}

export interface LocalPod {
  nodes: LocalNode[];
  ledger: HubLedger;
  /** Stops a node's server (its open links break) and takes it out of the pod. */
  kill(id: string): Promise<void>;
  close(): Promise<void>;
}

export async function startLocalPod(ids: string[], root: string, hubUrl: string): Promise<LocalPod> {
  const ledger = new HubLedger();
  const nodes: LocalNode[] = [];
  const byId = new Map<string, LocalNode & { secret: Buffer }>();
  for (const id of ids) {
    const secret = randomBytes(32);
    const store = new ModelStore(join(root, id), new HubClient({ endpoint: hubUrl }));
    const node = { id, store, secret, alive: true, served: 0 } as LocalNode & { secret: Buffer };
    node.server = await startWeightsServer({
      secret,
      registry: store.chunks,
      host: '127.0.0.1',
      onServed: () => node.onServed?.(++node.served),
    });
    const live = (n: string) => byId.get(n)?.alive ?? false;
    node.pod = podAccess({
      peers: () => [...byId.values()].filter((n) => n.alive && n.id !== id).map((n) => n.id),
      async have(peer, key) {
        const p = byId.get(peer);
        const f = p?.alive ? await p.store.chunks.lookup(key) : undefined;
        if (!p || !f) return undefined;
        return { ok: true as const, availability: p.store.chunks.availability(f), endpoints: [{ host: '127.0.0.1', port: p.server.port }], secret: p.secret.toString('base64') };
      },
      async claim(key, _size, chunks, failed) {
        return ledger.claim(key, chunks, id, { failed, live });
      },
      async listing(peer, repo) {
        const m = await byId.get(peer)?.store.readManifest(repo);
        return m && { repo, commit: m.commit, files: Object.entries(m.files).map(([path, f]) => ({ path, size: f.size, sha256: f.sha256, gitSha1: f.gitSha1 })) };
      },
    });
    byId.set(id, node);
    nodes.push(node);
  }
  return {
    nodes,
    ledger,
    async kill(id) {
      const n = byId.get(id)!;
      n.alive = false;
      await n.server.close();
    },
    async close() {
      for (const n of nodes) {
        await n.server.close();
        await n.store.close();
      }
    },
  };
}
