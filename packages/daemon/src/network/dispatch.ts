/**
 * Sending one job out: to the best candidate, and on a failure before the first token to the next
 * (a pod that refused, crashed, hung or could not be reached), at most `maxAttempts` pods. Once a
 * token has reached the caller the job belongs to that pod: a later failure is the caller's error,
 * never a second pod continuing the text (jobs are never split across pods).
 */
import { ServeError } from '../requests/errors.js';
import { JobFailure, type JobOutcome } from './job-protocol.js';

export interface Tried {
  peer: string;
  code: string;
  message: string;
}

export interface Dispatched {
  peer: string;
  outcome: JobOutcome;
  /** Pods asked before the one that served it, and why each did not. */
  tried: Tried[];
}

export async function dispatchJob(
  peers: string[],
  attempt: (peer: string) => Promise<JobOutcome>,
  onFailure: (peer: string, failure: JobFailure) => void,
  o: { maxAttempts?: number; signal?: AbortSignal } = {},
): Promise<Dispatched> {
  const tried: Tried[] = [];
  for (const peer of peers.slice(0, o.maxAttempts ?? 3)) {
    if (o.signal?.aborted) throw new ServeError(499, 'cancelled', 'client went away');
    try {
      return { peer, outcome: await attempt(peer), tried };
    } catch (err) {
      if (!(err instanceof JobFailure)) throw err;
      onFailure(peer, err);
      if (!err.beforeFirstToken) throw new ServeError(err.code === 'preempted' ? 503 : 502, err.code, `pod ${peer} failed during the answer: ${err.message}`);
      tried.push({ peer, code: err.code, message: err.message });
    }
  }
  const why = tried.map((t) => `${t.peer.slice(-8)}: ${t.message}`).join('; ');
  throw new ServeError(503, 'network_unavailable', tried.length ? `no pod on the network could take the job (${why})` : 'no pod on the network offers this model');
}
