/**
 * Starts `size` rank processes and connects them into one TCP group: the multi-process tests,
 * the namespace test and the benchmark share this.
 */
import { killRanks, spawnRanks, type RankProcess, type SpawnRanksOptions } from './ranks.js';

export interface MeshOptions extends SpawnRanksOptions {
  /** Address each rank listens on (index = rank). @default 127.0.0.1 */
  hosts?: string[];
  groupId?: string;
  secret?: string;
  encrypt?: false | 'aes-256-gcm' | 'chacha20-poly1305';
  timeoutMs?: number;
  thresholdBytes?: number;
  chunkBytes?: number;
}

export interface Mesh {
  ranks: RankProcess[];
  /** Sends the same command to every rank and waits for all answers. */
  all<T = Record<string, unknown>>(cmd: string, args?: (rank: number) => Record<string, unknown>, timeoutMs?: number): Promise<T[]>;
  close(): Promise<void>;
}

export async function startMesh(size: number, options: MeshOptions = {}): Promise<Mesh> {
  const ranks = await spawnRanks(size, options);
  try {
    const hosts = options.hosts ?? ranks.map(() => '127.0.0.1');
    const listening = await Promise.all(ranks.map((p, r) => p.request<{ port: number }>('listen', { host: hosts[r] })));
    const peers = listening.map((l, r) => ({ addresses: [{ host: hosts[r], port: l.port }] }));
    await Promise.all(
      ranks.map((p, rank) =>
        p.request('connect', {
          rank,
          peers,
          groupId: options.groupId ?? 'mesh-test',
          secret: options.secret ?? 'mesh-secret',
          encrypt: options.encrypt ?? false,
          timeoutMs: options.timeoutMs,
          thresholdBytes: options.thresholdBytes,
          chunkBytes: options.chunkBytes,
        }),
      ),
    );
  } catch (err) {
    killRanks(ranks);
    throw err;
  }
  return {
    ranks,
    all: <T,>(cmd: string, args?: (rank: number) => Record<string, unknown>, timeoutMs?: number) =>
      Promise.all(ranks.map((p, r) => p.request<T>(cmd, args?.(r) ?? {}, timeoutMs))),
    async close() {
      await Promise.allSettled(ranks.map((p) => p.request('close', {}, 5000)));
      killRanks(ranks);
    },
  };
}
