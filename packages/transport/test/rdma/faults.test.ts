/**
 * Faults on the simulated fabric end in errors that name a peer, within the timeout — never in a hang.
 * (Simulation only: how real Thunderbolt ports fail has not been observed here.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RdmaCompletionError, RdmaStallError, WcStatus } from '../../src/rdma/index.js';
import { deviceName, simMesh, within, type SimMesh } from './helpers.js';

let mesh: SimMesh | null = null;
afterEach(async () => {
  await mesh?.close();
  mesh = null;
});

/** The queue pair `rank` uses to reach `peer`. */
function qpn(m: SimMesh, rank: number, peer: number): number {
  const qp = m.fabric.queuePairs(`host${rank}`).find((q) => q.device.name === deviceName(peer));
  if (!qp) throw new Error(`no queue pair host${rank} -> ${peer}`);
  return qp.qpn;
}

const TIMEOUT = 300;

async function settleAll(ps: Promise<unknown>[]): Promise<{ ms: number; results: PromiseSettledResult<unknown>[] }> {
  const t0 = performance.now();
  const results = await within(Promise.allSettled(ps), 5000, 'faulty collective');
  return { ms: performance.now() - t0, results };
}

function reasons(results: PromiseSettledResult<unknown>[]): Error[] {
  return results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as Error);
}

describe('RDMA faults on the simulated fabric', () => {
  it('a stalled queue pair turns into a stall error naming the peer, within the timeout', async () => {
    mesh = await simMesh({ size: 3, timeoutMs: TIMEOUT });
    mesh.fabric.stall(qpn(mesh, 1, 0));
    const { ms, results } = await settleAll(mesh.groups.map((g) => g.allReduce(new Float32Array(100).fill(1))));
    const errs = reasons(results);
    expect(errs.length).toBeGreaterThan(0);
    expect(errs.some((e) => e instanceof RdmaStallError && /rank [01] \(rdma_en/.test(e.message))).toBe(true);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT * 0.8);
    expect(ms).toBeLessThan(TIMEOUT + 3000);
  });

  it('a lost peer (host gone mid-collective) rejects the survivors naming it', async () => {
    mesh = await simMesh({ size: 3, timeoutMs: TIMEOUT });
    // Rank 2 starts the all-reduce and dies before any data moves.
    const inFlight = mesh.groups.map((g) => g.allReduce(new Float32Array(50_000).fill(2)));
    mesh.fabric.killHost('host2');
    const { results } = await settleAll(inFlight.slice(0, 2));
    const errs = reasons(results);
    expect(errs).toHaveLength(2);
    for (const e of errs) expect(e.message).toMatch(/rank 2/);
    await settleAll([inFlight[2]!]);
  });

  it('with RC (Linux) a lost peer surfaces as an error completion instead of a stall', async () => {
    mesh = await simMesh({ size: 2, timeoutMs: 3000, mode: 'linux', rcRetryMs: 50 });
    const [a] = mesh.groups;
    // Rank 1 posted its receive, then vanished: rank 0's send finds no one acknowledging.
    // Rank 1's own receive fails too once its host is gone; only rank 0 is under test here.
    mesh.groups[1]!.recv(0, new Uint8Array(10)).catch(() => {});
    await new Promise((r) => setTimeout(r, 10));
    mesh.fabric.killHost('host1');
    await new Promise((r) => setTimeout(r, 10));
    const t0 = performance.now();
    const failed = await within(
      a!.send(1, new Uint8Array(10)).then(() => a!.recv(1, new Uint8Array(4))).catch((e) => e),
      5000,
      'send to a lost RC peer',
    );
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(failed).toBeInstanceOf(RdmaCompletionError);
    expect((failed as Error).message).toMatch(/rank 1/);
  });

  it('an error completion fails the collective with the status and the peer, and the group stays failed', async () => {
    mesh = await simMesh({ size: 3, timeoutMs: TIMEOUT });
    mesh.fabric.injectErrorCompletion(qpn(mesh, 1, 0), 'recv', WcStatus.LOC_PROT_ERR);
    const { results } = await settleAll(mesh.groups.map((g) => g.allReduce(new Float32Array(64).fill(1))));
    const err = (results[1] as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(RdmaCompletionError);
    expect(err.message).toMatch(/recv to rank 0 .*failed: LOC_PROT_ERR/);
    // The failing rank refuses further work at once; the others find out through their watchdogs.
    await expect(mesh.groups[1]!.barrier()).rejects.toThrow(/unusable after an earlier failure: .*LOC_PROT_ERR/);
    const later = await settleAll([0, 2].map((r) => mesh!.groups[r]!.barrier()));
    expect(reasons(later.results).length).toBe(2);
  });

  it('a port that goes down mid-transfer ends in a stall error, not a hang', async () => {
    mesh = await simMesh({ size: 2, timeoutMs: TIMEOUT });
    const [a, b] = mesh.groups;
    const big = new Uint8Array(2_000_000);
    const ops = [a!.send(1, big), b!.recv(0, new Uint8Array(big.length))];
    mesh.fabric.setPortState('host1', deviceName(0), 'DOWN');
    const { results } = await settleAll(ops);
    const errs = reasons(results);
    expect(errs.length).toBeGreaterThan(0);
    for (const e of errs) expect(e).toBeInstanceOf(RdmaStallError);
  });

  it('a failing completion poll (library error) rejects the pending operations instead of hanging', async () => {
    let broken = false;
    mesh = await simMesh({
      size: 2,
      timeoutMs: 5000,
      verbsFor: (r, v) =>
        r === 0
          ? new Proxy(v, {
              get(target, prop, receiver) {
                if (prop === 'pollCq') {
                  return (cq: number, max: number) => {
                    if (broken) throw new Error('EIO: ibv_poll_cq failed');
                    return target.pollCq(cq, max);
                  };
                }
                const value = Reflect.get(target, prop, receiver);
                return typeof value === 'function' ? value.bind(target) : value;
              },
            })
          : v,
    });
    expect(mesh.choices[0]![0]!.transport).toBe('rdma');
    broken = true;
    const t0 = performance.now();
    const err = await within(mesh.groups[0]!.recv(1, new Uint8Array(4)).catch((e: Error) => e), 3000, 'recv with a broken poll');
    expect((err as Error).message).toMatch(/polling completions failed: EIO: ibv_poll_cq failed/);
    expect(performance.now() - t0).toBeLessThan(3000);
  });

  it('a per-operation timeout overrides the group default', async () => {
    mesh = await simMesh({ size: 2, timeoutMs: 10_000 });
    const t0 = performance.now();
    await expect(mesh.groups[0]!.recv(1, new Uint8Array(8), { timeoutMs: 150 })).rejects.toThrow(/rank 1 .*stalled: no completion for 150 ms/);
    expect(performance.now() - t0).toBeLessThan(3000);
  });
});
