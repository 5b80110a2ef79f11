/** Polled waits on the data plane: when a rank keeps its event loop busy instead of sleeping on a socket. */
import type { Group } from './transport.js';

/**
 * How long a rank keeps its event loop polling (instead of sleeping in the kernel) while it waits
 * for a peer inside a forward step, ms, unless the runner is told otherwise. A tensor-parallel decode step meets the other ranks 2+ times
 * per layer, each after well under a millisecond of compute on small models: a process that sleeps on
 * its socket is woken by the scheduler at every meeting, which on a VM (halted vCPU, wake-up IPI)
 * adds 100-300 us each — measured on the 2-core bench machine at low load, median wait of a 2 KiB
 * all-reduce ~260 us sleeping vs ~55 us polling. Short, because a peer that has not answered within
 * it has usually been preempted: then polling only keeps the core from whoever should run, and an
 * idle instance must sleep. The daemon's setting (ORCHARD_DATA_PLANE_POLL_MS) reaches the runners in
 * their init (0: never poll; benchmarks).
 */
export const POLL_MS = 0.25;

/**
 * Share of this process's recent polled waits that ended within the poll window (moving average
 * over ~16). On a machine with more busy processes than cores most waits outlast the window — the
 * peer was preempted — and polling then delays the peer: a core this rank leaves idle is where the
 * scheduler would move the preempted peer. Polling pays (~200 us saved per quick wait, up to the
 * window lost per slow one) only when most waits are quick: below three quarters, only every
 * PROBE_EVERY-th wait polls, to notice when they are quick again. (Waits that sleep are not counted:
 * the wake-up itself would make them look slow.)
 */
let quickShare = 1;
let sinceProbe = 0;
const PROBE_EVERY = 8;

/**
 * Resolves like `p`. While waits have been quick (see `quickShare`), keeps this process's event loop
 * from blocking (setImmediate chain: libuv polls its sockets with a zero timeout) until `p` settles
 * or `ms` pass.
 */
export function pollWhile<T>(p: Promise<T>, ms = POLL_MS): Promise<T> {
  if (ms <= 0) return p;
  if (quickShare < 0.75 && ++sinceProbe < PROBE_EVERY) return p;
  sinceProbe = 0;
  const until = performance.now() + ms;
  let settled = false;
  const spin = () => {
    if (!settled && performance.now() < until) setImmediate(spin);
  };
  setImmediate(spin);
  return p.finally(() => {
    settled = true;
    quickShare += ((performance.now() <= until ? 1 : 0) - quickShare) / 16;
  });
}

/**
 * Sums `buf` over the members of one stage (ranks of the instance's group, ascending, `me` among them)
 * with the transport's all-reduce on their sub-group. Runs 2+ times per layer per token: the sub-group
 * is looked up again only when `groupOf` hands out another group (a runner's group may be replaced).
 */
export function stageAllReduce(groupOf: () => Group, me: number, members: readonly number[], timeoutMs: number, pollMs = POLL_MS): (buf: Float32Array) => Promise<void> {
  const options = { timeoutMs };
  let parent: Group | null = null;
  let stage: Group | null = null;
  return async (buf) => {
    const group = groupOf();
    if (group !== parent) {
      if (group.rank !== me) throw new Error(`stage all-reduce of rank ${me} handed the group of rank ${group.rank}`);
      stage = group.subgroup(members);
      parent = group;
    }
    await pollWhile(stage!.allReduce(buf, 'sum', options), pollMs);
  };
}
