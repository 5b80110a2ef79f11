/**
 * One rank of a runner's data plane in a process of its own (for data-plane-encryption.test.ts):
 * argv = rank, JSON {peers, directCidrs, encryption}. Listens on its peer entry, forms the data plane
 * as a runner does (runner/data-plane.ts, no RDMA), all-reduces once and prints
 * {"links":[...],"summary":"...","sum":[...]} on stdout.
 */
import { createDataPlane } from '../../packages/daemon/src/runner/data-plane.js';
import { listenTcp } from '../../packages/daemon/src/runner/transport.js';

const rank = Number(process.argv[2]);
const { peers, directCidrs, encryption } = JSON.parse(process.argv[3]) as {
  peers: { addresses: { host: string; port: number }[] }[];
  directCidrs: string[];
  encryption: 'auto' | 'always' | 'never';
};
const listener = await listenTcp(peers[rank].addresses[0]);
const none = { verbs: null, reason: 'not tested here', deviceFor: () => undefined, noDeviceReason: () => undefined, close: async () => {} };
const plane = await createDataPlane({
  rank,
  peers,
  groupId: 'netns-encryption',
  secret: Buffer.from('netns-secret'),
  listener,
  connectTimeoutMs: 20_000,
  rdma: none,
  security: { encryption, cipher: 'auto', directCidrs },
});
const x = Float32Array.from({ length: 300_000 }, (_, i) => (i % 7) + rank);
await plane.group.allReduce(x);
process.stdout.write(`${JSON.stringify({ links: plane.links, summary: plane.summary, sum: [x[0], x[1], x[299_999]] })}\n`);
await plane.group.close();
process.exit(0);
