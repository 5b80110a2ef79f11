/** What a rank's data-plane loop (driver or follower) runs with. */
import type { InstanceLayout, ModelShard } from '@orchard/engine';
import type { Group } from './transport.js';
import type { DraftModel } from './draft-model.js';
import type { CompileConstraint, Speculate } from './requests.js';

/** Waits on an idle data plane: followers wait for the next request as long as the instance lives. */
export const IDLE_TIMEOUT_MS = 2 ** 31 - 1;

export interface LoopContext {
  group: Group;
  layout: InstanceLayout;
  shard: ModelShard;
  maxBatch: number;
  stepMs: number;
  /** See POLL_MS. */
  pollMs: number;
  compile?: CompileConstraint;
  /** Bytes of K/V the driver keeps for prefix reuse (split-prefix.ts); 0 or absent: none. */
  prefixCacheBytes?: number;
  /** Speculation of requests that do not say. @default 'off' */
  speculate?: Speculate;
  /** The draft model the driver runs for requests that speculate with `draft`. */
  draftModel?: DraftModel;
  /** What the driver's draft policies time steps with, ms. @default wall time (performance.now) */
  stepClock?: () => number;
}
