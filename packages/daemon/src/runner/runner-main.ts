/**
 * A runner process: one rank of one instance. Loads its shard, binds its data-plane port, joins the
 * instance's group once the daemon sends the peers' endpoints, then either drives requests (rank 0)
 * or follows headers. Runs outside the daemon so a long prefill never stalls the daemon's event loop,
 * and exits when the daemon goes away (IPC disconnect), closing its sockets so the peers notice at once.
 */
import { createReferenceBackend, createWasmBackend } from '@orchard/engine';
import { listenTcp, type Group } from './transport.js';
import { createDataPlane } from './data-plane.js';
import { selectRdma, type RdmaSelection } from './rdma-select.js';
import { startRank } from './local.js';
import { loadRankOn } from './gpu-shard.js';
import type { FromRunner, RunnerInit, ToRunner } from './protocol.js';
import type { Driver } from './shard-loop.js';

function send(m: FromRunner): void {
  process.send?.(m);
}

function die(message: string): void {
  process.stderr.write(`orchard runner: ${message}\n`);
  send({ type: 'dead', message });
  setTimeout(() => process.exit(1), 50);
}

let group: Group | null = null;
let rdmaSelection: RdmaSelection | null = null;
let driver: Driver | null = null;
const cancelled = new Set<number>();
let init: RunnerInit | null = null;
let peersReady: ((p: Extract<ToRunner, { type: 'peers' }>['peers']) => void) | null = null;
const peers = new Promise<Extract<ToRunner, { type: 'peers' }>['peers']>((resolve) => (peersReady = resolve));
const queue: Extract<ToRunner, { type: 'generate' }>[] = [];
let active = 0;

process.on('disconnect', () => process.exit(0));
process.on('message', (raw) => {
  const m = raw as ToRunner;
  switch (m.type) {
    case 'init':
      init = m.init;
      void start(m.init).catch((err) => die(`runner rank ${m.init.rank}: ${(err as Error).message}`));
      return;
    case 'peers':
      peersReady?.(m.peers);
      return;
    case 'generate':
      queue.push(m);
      pump();
      return;
    case 'cancel':
      cancelled.add(m.id);
      return;
    case 'shutdown':
      void shutdown();
      return;
  }
});

async function start(i: RunnerInit): Promise<void> {
  const listener = await listenTcp({ host: i.listenHost });
  send({ type: 'listening', port: listener.address.port });
  const t0 = performance.now();
  // The shard's all-reduce needs the group, which exists only after every rank is listening.
  // gpu: WebGPU, or the wasm kernels when the GPU cannot be used (the note says why).
  const { shard, note } = await loadRankOn(i.backend ?? { kind: 'reference' }, i.modelDir, i.layout, i.rank, () => group!, {
    maxBatch: i.maxBatch,
    maxSeqLen: i.maxSeqLen,
    stepMs: i.stepMs,
    cpuBackend: (kind) => (kind === 'wasm' ? createWasmBackend({ threads: i.backend?.threads ?? 1 }) : createReferenceBackend()),
  });
  if (note) process.stderr.write(`orchard runner: ${note}\n`);
  send({ type: 'loaded', loadMs: performance.now() - t0, bytesRead: shard.bytesRead, backend: note ?? i.backend?.kind ?? 'reference' });
  const endpoints = await peers;
  // RDMA where both ends of a link have it, TCP elsewhere; the choice per link goes to the daemon with 'ready'.
  rdmaSelection = await selectRdma(i.rank, endpoints);
  const plane = await createDataPlane({
    rank: i.rank,
    peers: endpoints,
    groupId: i.groupId,
    secret: Buffer.from(i.secret, 'hex'),
    listener,
    connectTimeoutMs: 20_000,
    rdma: rdmaSelection,
    security: i.security,
    log: (line) => process.stderr.write(`orchard runner: rank ${i.rank}: ${line}\n`),
  });
  group = plane.group;
  await group.barrier({ timeoutMs: 20_000 });
  const started = startRank(group, i.layout, shard, { stepMs: i.stepMs });
  driver = started.driver;
  send({ type: 'ready', links: plane.links, dataPlane: plane.summary });
  if (!driver)
    started.done.then(
      () => shutdown(),
      (err) => die(`rank ${i.rank}: data plane failed: ${(err as Error).message}`),
    );
}

/** Starts queued requests while the driver has a free sequence slot. */
function pump(): void {
  if (!driver) return;
  while (queue.length && active < driver.maxSequences) {
    const m = queue.shift()!;
    if (cancelled.delete(m.id)) continue;
    active++;
    void runOne(driver, m).finally(() => {
      active--;
      pump();
    });
  }
}

async function runOne(d: Driver, { id, req }: Extract<ToRunner, { type: 'generate' }>): Promise<void> {
  try {
    const outcome = await d.generate(req, (token) => {
      send({ type: 'token', id, token });
      return !cancelled.has(id);
    });
    cancelled.delete(id);
    send({ type: 'done', id, outcome });
  } catch (err) {
    send({ type: 'failed', id, message: (err as Error).message });
    if (d.broken) die(`rank 0: data plane failed: ${d.broken.message}`);
  }
}

async function shutdown(): Promise<void> {
  try {
    await driver?.stop();
    await group?.close();
    await rdmaSelection?.close();
  } finally {
    process.exit(0);
  }
}

// Requests that arrive before the group is up wait in the queue; start draining once ready.
setInterval(() => {
  if (driver && queue.length) pump();
}, 200).unref();
void init;
