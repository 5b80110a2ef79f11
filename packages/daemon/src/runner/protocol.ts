/** Messages between a daemon and its runner processes (node IPC, structured clone). */
import type { TokenLogprob } from '@orchard/engine';
import type { GenerateOutcome, GenerateRequest, Speculate } from './requests.js';
import type { InstanceLayout } from '@orchard/engine';
import type { TcpPeer } from './transport.js';
import type { DataPlaneSecurity } from './link-security.js';

export interface RunnerInit {
  modelDir: string;
  layout: InstanceLayout;
  rank: number;
  groupId: string;
  /** Per-instance data-plane secret (hex) handed out by the control plane. */
  secret: string;
  /** Address the data-plane port binds to. */
  listenHost: string;
  /** Which data-plane connections to encrypt (the daemon's setting and its direct cables). @default encrypt all that leave the machine */
  security?: DataPlaneSecurity;
  maxSeqLen?: number;
  maxBatch?: number;
  /**
   * Continuous batching, split or not: sequences per step, prefix-cache bytes and how requests that do
   * not say speculate (batch-driver.ts / driver.ts defaults), and the draft model (HF directory or
   * GGUF) that rank 0 loads for speculation with `draft` (draft-model.ts).
   */
  batch?: { sequences: number; prefixCacheBytes: number; speculate?: Speculate; draftModel?: string };
  /** Per data-plane step timeout, ms. */
  stepMs?: number;
  /** How long a rank polls its event loop inside a data-plane wait, ms (0: never; see poll.ts). */
  pollMs?: number;
  /**
   * Least time between two token messages to the daemon, ms (token-batch.ts; 0: one per event-loop
   * turn, for benchmarks that time each token of a fast model). @default TOKEN_INTERVAL_MS
   */
  tokenIntervalMs?: number;
  /** Test only: simulated RDMA verbs with these settings (ORCHARD_RDMA_SIM, see rdma-select.ts). */
  rdmaSim?: string | null;
  /**
   * Matrix kernels of this rank. @default reference. `gpu`: WebGPU (runner/gpu-shard.ts), falling back to
   * wasm when the GPU cannot be used; `allowSoftware` accepts a software adapter (lavapipe).
   */
  backend?: { kind: 'reference' | 'wasm' | 'gpu'; threads?: number; allowSoftware?: boolean };
}

/** One link of a rank's data plane, as chosen at setup (see runner/data-plane.ts). */
export interface RunnerLink {
  peer: number;
  transport: 'rdma' | 'tcp' | 'fallback';
  reason: string;
  /** TCP links: the cipher protecting it, or null when it is plain (a direct cable, this machine, or switched off). */
  encryption?: string | null;
}

/** Request `id` sampled `token`. */
export interface TokenItem {
  id: number;
  token: number;
  logprob?: TokenLogprob;
}

export type ToRunner =
  | { type: 'init'; init: RunnerInit }
  | { type: 'peers'; peers: TcpPeer[] }
  | { type: 'generate'; id: number; req: GenerateRequest }
  | { type: 'cancel'; id: number }
  | { type: 'shutdown' };

export type FromRunner =
  | { type: 'listening'; port: number }
  /** `backend`: what the rank computes on ("gpu: <adapter>", "wasm", a GPU fallback with its reason). */
  | { type: 'loaded'; loadMs: number; bytesRead: number; backend?: string }
  /** `links`: per peer rank, RDMA (reason = device) or TCP (reason = why not RDMA); `dataPlane`: one line. */
  | { type: 'ready'; links?: RunnerLink[]; dataPlane?: string }
  | ({ type: 'token' } & TokenItem)
  /** Tokens sampled in one turn of the runner's event loop (token-batch.ts), in the order they were sampled. */
  | { type: 'tokens'; tokens: TokenItem[] }
  | { type: 'done'; id: number; outcome: GenerateOutcome }
  /** `invalid`: the request itself was at fault (a schema the grammar engine rejects), not the instance. */
  | { type: 'failed'; id: number; message: string; invalid?: boolean }
  /** The rank can no longer serve (peer lost, load failed); the process exits after this. */
  | { type: 'dead'; message: string }
  /**
   * The rank could not load its model (config, tokenizer, weights): sent instead of `dead`, before
   * `ready`, and the process exits after it. `files`: the model's files are at fault (they will fail
   * the same way until they change), not this machine (memory, a GPU).
   */
  | { type: 'load-failed'; message: string; files: boolean };
