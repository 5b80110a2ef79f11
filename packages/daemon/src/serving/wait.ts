/**
 * Waiting for the pod to change instead of polling: `until` re-checks a condition each time one of
 * the sources reports a change (a state event, a gossiped status) and settles with its first defined
 * value, or rejects at the deadline or when the caller aborts.
 */
export type Subscribe = (listener: () => void) => () => void;

export function until<T>(subscribe: Subscribe, check: () => T | undefined, o: { timeoutMs: number; signal?: AbortSignal; timeout: () => Error }): Promise<T> {
  const first = check();
  if (first !== undefined) return Promise.resolve(first);
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const finish = (f: () => void) => {
      if (done) return;
      done = true;
      off();
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      f();
    };
    const onAbort = () => finish(() => reject(o.signal!.reason ?? new Error('aborted')));
    const off = subscribe(() => {
      let v: T | undefined;
      try {
        v = check();
      } catch (err) {
        return finish(() => reject(err));
      }
      if (v !== undefined) finish(() => resolve(v));
    });
    const timer = setTimeout(() => finish(() => reject(o.timeout())), o.timeoutMs);
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One subscription over several sources. */
export function anyOf(...sources: Subscribe[]): Subscribe {
  return (listener) => {
    const offs = sources.map((s) => s(listener));
    return () => offs.forEach((off) => off());
  };
}
