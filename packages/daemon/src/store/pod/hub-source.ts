/**
 * Byte ranges of one hub file: an HTTP Range request whose body is read as it arrives, with an idle
 * timeout, so a chunk is verified and offered to peers the moment its last byte is in.
 */
import { networkCause, StoreError } from '../errors.js';

export interface HubSource {
  /** The bytes [start, end) of the file, as they arrive (exactly end - start bytes or an error). */
  range(start: number, end: number, signal?: AbortSignal): AsyncIterable<Uint8Array>;
}

export interface HubSourceOptions {
  url: string;
  headers?: Record<string, string>;
  label: string;
  fetch?: typeof fetch;
  /** A response that delivers no byte for this long fails. @default 30000 */
  idleMs?: number;
}

export function hubSource(o: HubSourceOptions): HubSource {
  const fetchFn = o.fetch ?? fetch;
  const idleMs = o.idleMs ?? 30_000;
  return {
    async *range(start, end, signal) {
      const idle = new AbortController();
      let timer = setTimeout(() => idle.abort(), idleMs);
      const all = signal ? AbortSignal.any([signal, idle.signal]) : idle.signal;
      const stalled = () => new StoreError(`${o.label}: the hub sent no data for ${idleMs} ms (bytes ${start}-${end - 1})`);
      try {
        const res = await fetchFn(o.url, { headers: { ...o.headers, range: `bytes=${start}-${end - 1}` }, signal: all, redirect: 'follow' }).catch((err: Error) => {
          throw idle.signal.aborted ? stalled() : new StoreError(`${o.label}: range request failed (${networkCause(err, o.url)})`);
        });
        if (res.status !== 206) {
          await res.body?.cancel();
          const refused = res.status === 401 || res.status === 403 ? (o.headers?.authorization ? ' although HF_TOKEN is set (no access to this gated or private repo?)' : ': gated or private, set HF_TOKEN') : '';
          throw new StoreError(`${o.label}: the hub answered HTTP ${res.status} to a range request (bytes ${start}-${end - 1})${refused}`);
        }
        let got = 0;
        let finished = false;
        const reader = res.body!.getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read().catch((err: Error) => {
              throw idle.signal.aborted ? stalled() : new StoreError(`${o.label}: connection to the hub broke at byte ${start + got} (${err.message})`);
            });
            if (done) {
              finished = true;
              break;
            }
            clearTimeout(timer);
            timer = setTimeout(() => idle.abort(), idleMs);
            if (got + value.byteLength > end - start) throw new StoreError(`${o.label}: the hub sent more than the ${end - start} bytes asked for`);
            got += value.byteLength;
            yield value;
          }
        } finally {
          // A consumer that stopped early (or an error) must not leave the response open.
          if (!finished) await reader.cancel().catch(() => undefined);
        }
        if (got !== end - start) throw new StoreError(`${o.label}: the hub closed the connection at byte ${start + got} of ${start}-${end - 1}`);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
