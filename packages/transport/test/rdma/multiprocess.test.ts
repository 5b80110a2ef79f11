/**
 * The simulated fabric spanning processes: each rank is a separate Node process, queue pairs talk over
 * loopback TCP with the same credit/frame rules, the control plane is relayed by this process.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { rankData, referenceReduce } from './helpers.js';

const WORKER = fileURLToPath(new URL('./fixtures/sim-worker.ts', import.meta.url));
let children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  children = [];
});

type Msg = { type: string; [k: string]: unknown };

function startRanks(size: number, opts: { lengths: number[]; timeoutMs: number; die?: number }): Promise<Msg[][]> {
  const logs: Msg[][] = [...Array(size)].map(() => []);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ranks did not finish: ${JSON.stringify(logs.map((l) => l.map((m) => m.type)))}`)), 40_000);
    let finished = 0;
    const finish = () => {
      if (++finished === size) {
        clearTimeout(timer);
        resolve(logs);
      }
    };
    for (let rank = 0; rank < size; rank++) {
      const child = fork(WORKER, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      child.on('message', (m: Msg) => {
        logs[rank]!.push(m);
        if (m.type === 'ctl') children[m.to as number]?.send({ type: 'ctl', from: rank, round: m.round, value: m.value });
      });
      child.on('exit', finish);
      child.send({ type: 'start', rank, size, lengths: opts.lengths, timeoutMs: opts.timeoutMs, die: opts.die === rank });
    }
  });
}

describe('simulated fabric across processes (loopback sockets)', () => {
  it('3 processes all-reduce correctly over RDMA links, identical on every rank', async () => {
    const lengths = [1, 1023, 8193, 70_001];
    const logs = await startRanks(3, { lengths, timeoutMs: 5000 });
    for (const log of logs) {
      expect(log.find((m) => m.type === 'error')).toBeUndefined();
      const ready = log.find((m) => m.type === 'ready')!;
      expect((ready.choices as { transport: string }[]).map((c) => c.transport)).toEqual(['rdma', 'rdma']);
      expect(log.some((m) => m.type === 'done')).toBe(true);
    }
    for (const n of lengths) {
      const want = createHash('sha256')
        .update(new Uint8Array(referenceReduce([0, 1, 2].map((r) => rankData(r, n, n)), 'sum').buffer))
        .digest('hex');
      for (const log of logs) expect(log.find((m) => m.type === 'result' && m.n === n)?.sha, `n=${n}`).toBe(want);
    }
  });

  it('a rank process that exits makes the others fail with an error naming it, within the timeout', async () => {
    const t0 = performance.now();
    const logs = await startRanks(3, { lengths: [5000], timeoutMs: 400, die: 2 });
    expect(performance.now() - t0).toBeLessThan(30_000);
    for (const r of [0, 1]) {
      const err = logs[r]!.find((m) => m.type === 'error');
      expect(err?.message).toMatch(/rank 2 .*stalled|unusable/);
    }
  });
});
