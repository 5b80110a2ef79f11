/**
 * What a tensor-parallel step costs on this machine apart from the maths: two processes that
 * compute for the same time, then meet in the runners' stage all-reduce (one hidden vector over the loopback
 * TCP data plane), over and over, as the ranks of a TP-2 instance do twice per layer per token.
 * Both must be running at the same moment to meet quickly; on a shared machine a third busy process
 * preempts one of them and the other waits. The mean wait is that cost, measured now.
 *
 * Run as a module (`measureRendezvous`), it forks this file as the second rank.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createTcpGroup, listenTcp, type Group } from '@orchard/transport';
import { stageAllReduce } from '../src/runner/poll.js';

const SECRET = 'bench-rendezvous-secret';

function compute(ms: number): number {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) x++;
  return x;
}

/**
 * Runs `warm` unmeasured then `iterations` measured rounds of compute-then-all-reduce on this rank;
 * returns the mean all-reduce wait of the measured ones, ms. (Waits on this VM shrink 2-4x over the
 * first seconds of continuous exchange, raw sockets too: the warm rounds keep that out of the mean.)
 */
async function loop(group: Group, computeMs: number, iterations: number, hidden: number, warm: number): Promise<number> {
  const allReduce = stageAllReduce(() => group, group.rank, [0, 1], 10_000);
  const buf = new Float32Array(hidden);
  let waited = 0;
  for (let i = -warm; i < iterations; i++) {
    compute(computeMs);
    const t = performance.now();
    await allReduce(buf);
    if (i >= 0) waited += performance.now() - t;
  }
  return waited / iterations;
}

/** Mean wait per all-reduce between two processes that compute `computeMs` between all-reduces, after `warm` unmeasured ones. */
export async function measureRendezvous(computeMs: number, iterations: number, hidden: number, warm = iterations): Promise<number> {
  const listener = await listenTcp({ host: '127.0.0.1' });
  const child = fork(fileURLToPath(import.meta.url), ['peer', String(listener.address.port), String(computeMs), String(iterations), String(hidden), String(warm)], { execArgv: ['--import', 'tsx'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m) => resolve(m as number));
      child.once('exit', (code) => reject(new Error(`rendezvous peer exited (${code}) before listening`)));
    });
    const group = await createTcpGroup({ rank: 0, peers: [{ addresses: [listener.address] }, { addresses: [{ host: '127.0.0.1', port }] }], groupId: 'rendezvous', secret: SECRET, listener, connectTimeoutMs: 20_000 });
    try {
      return await loop(group, computeMs, iterations, hidden, warm);
    } finally {
      await group.close();
    }
  } finally {
    child.kill();
  }
}

if (process.argv[2] === 'peer') {
  const [port, computeMs, iterations, hidden, warm] = process.argv.slice(3).map(Number);
  const listener = await listenTcp({ host: '127.0.0.1' });
  process.send!(listener.address.port);
  const group = await createTcpGroup({ rank: 1, peers: [{ addresses: [{ host: '127.0.0.1', port }] }, { addresses: [listener.address] }], groupId: 'rendezvous', secret: SECRET, listener, connectTimeoutMs: 20_000 });
  // Rank 0 closes as soon as it has its number; a last receive cut short here does not matter.
  await loop(group, computeMs, iterations, hidden, warm).catch(() => undefined);
  await group.close().catch(() => undefined);
  process.exit(0);
}
