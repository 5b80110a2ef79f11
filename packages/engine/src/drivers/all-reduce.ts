/**
 * An in-process all-reduce joining N tensor ranks that run as concurrent promises in one thread.
 * Sums in fixed rank order ((b0 + b1) + b2) + ... once, then copies the result to every rank, so all
 * ranks end bit-identical regardless of the order they arrive in.
 */
import type { AllReduce } from '../shard.js';

export function createInProcessAllReduce(size: number): AllReduce[] {
  let bufs: (Float32Array | undefined)[] = new Array(size);
  let resolvers: (() => void)[] = [];
  let rejecters: ((e: Error) => void)[] = [];
  let arrived = 0;
  let sum = new Float32Array(0);

  const finish = () => {
    const len = bufs[0]!.length;
    const bad = bufs.findIndex((b) => b!.length !== len);
    const done = resolvers;
    const fail = rejecters;
    const all = bufs as Float32Array[];
    bufs = new Array(size);
    resolvers = [];
    rejecters = [];
    arrived = 0;
    if (bad >= 0) {
      const err = new Error(`all-reduce: rank ${bad} sent ${all[bad].length} values, rank 0 sent ${len}`);
      fail.forEach((f) => f(err));
      return;
    }
    if (sum.length < len) sum = new Float32Array(len);
    const s = sum.subarray(0, len);
    s.set(all[0]);
    for (let r = 1; r < size; r++) {
      const b = all[r];
      for (let i = 0; i < len; i++) s[i] += b[i];
    }
    for (const b of all) b.set(s);
    done.forEach((d) => d());
  };

  return Array.from({ length: size }, (_, rank) => (buf: Float32Array) =>
    new Promise<void>((resolve, reject) => {
      if (bufs[rank]) {
        reject(new Error(`all-reduce: rank ${rank} entered twice before the others arrived`));
        return;
      }
      bufs[rank] = buf;
      resolvers.push(resolve);
      rejecters.push(reject);
      if (++arrived === size) finish();
    }),
  );
}
