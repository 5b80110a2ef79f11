import { describe, expect, it } from 'vitest';
import { encodeProgress, ProgressBoard, type Progress } from '../../src/dashboard/progress.js';

function board(self: string, clock: { t: number }, sent: Progress[] = []) {
  return new ProgressBoard({ self, publish: (p) => sent.push(p), now: () => clock.t, ttlMs: 10_000 });
}

describe('dashboard progress board', () => {
  it('sums per-file download events into one entry per model, gossiped at most once a second', () => {
    const clock = { t: 1000 };
    const sent: Progress[] = [];
    const b = board('A', clock, sent);
    b.pullEvent('org/m', { file: 'a.safetensors', done: 10, total: 100 });
    b.pullEvent('org/m', { file: 'b.safetensors', done: 5, total: 50 });
    clock.t += 500;
    b.pullEvent('org/m', { file: 'a.safetensors', done: 60, total: 100 });
    expect(sent).toHaveLength(1);
    expect(b.list()).toEqual([{ node: 'A', model: 'org/m', phase: 'download', done: 65, total: 150, file: 'a.safetensors', at: 1500 }]);
    clock.t += 600;
    b.pullEvent('org/m', { file: 'b.safetensors', done: 50, total: 50 });
    expect(sent).toHaveLength(2);
    b.pullEnded('org/m');
    expect(sent.at(-1)).toMatchObject({ phase: 'load', done: 150, total: 150 });
    b.ready('org/m');
    expect(b.list()[0].phase).toBe('ready');
    clock.t += 6000;
    expect(b.list()).toEqual([]);
  });

  it('carries bytes by source over the files, the links in use and dropped peers, and keeps the sources after the download', () => {
    const clock = { t: 1000 };
    const sent: Progress[] = [];
    const b = board('A', clock, sent);
    const links = [{ source: 'B', link: '10.0.0.2:4000', bytes: 40, rate: 5e8 }];
    b.pullEvent('org/m', { file: 'config.json', done: 10, total: 10, bySource: { hub: 10 } });
    b.pullEvent('org/m', { file: 'model.safetensors', done: 60, total: 100, bySource: { B: 40, C: 20 }, links });
    b.badPeer('org/m', 'C');
    expect(b.list()[0]).toMatchObject({ phase: 'download', done: 70, total: 110, sources: { hub: 10, B: 40, C: 20 }, links, badPeers: ['C'] });
    // The last event of a file replaces its sources (they are cumulative per file), others stay.
    b.pullEvent('org/m', { file: 'model.safetensors', done: 100, total: 100, bySource: { B: 80, C: 20 } });
    b.pullEnded('org/m');
    const loading = b.list()[0];
    expect(loading).toMatchObject({ phase: 'load', sources: { hub: 10, B: 80, C: 20 }, badPeers: ['C'] });
    expect(loading.links).toBeUndefined();
    expect(sent.at(-1)).toMatchObject({ phase: 'load', sources: { hub: 10, B: 80, C: 20 } });
    b.ready('org/m');
    expect(b.list()[0]).toMatchObject({ phase: 'ready', sources: { hub: 10, B: 80, C: 20 } });
    // Gossiped entries are validated: a link list or sources of the wrong shape is refused.
    const other = board('Z', clock);
    expect(other.receive(encodeProgress(sent.at(-1)!), 'A')).toBe(true);
    expect(other.receive(encodeProgress({ ...sent.at(-1)!, sources: { hub: -1 } }), 'A')).toBe(false);
  });

  it('takes peers\' entries only from their sender, and forgets them when they go quiet or leave', () => {
    const clock = { t: 0 };
    const b = board('A', clock);
    const p: Progress = { node: 'B', model: 'org/m', phase: 'download', done: 1, total: 2, at: 123 };
    expect(b.receive(encodeProgress(p), 'C')).toBe(false); // claims to be B, sent by C
    expect(b.receive(new TextEncoder().encode('{"node":'), 'B')).toBe(false);
    expect(b.receive(encodeProgress({ ...p, phase: 'exploded' as never }), 'B')).toBe(false);
    expect(b.receive(encodeProgress(p), 'B')).toBe(true);
    expect(b.list()).toEqual([{ ...p, at: 0 }]);
    expect(b.list(new Set(['A']))).toEqual([]); // B left the pod
    expect(b.receive(encodeProgress(p), 'B')).toBe(true);
    clock.t = 10_001;
    expect(b.list()).toEqual([]); // silent for longer than the TTL
  });

  it('reports a failed pull with its reason', () => {
    const clock = { t: 0 };
    const b = board('A', clock);
    b.pullEvent('org/m', { file: 'a', done: 1, total: 9 });
    b.pullEnded('org/m', 'hub answered 404 for org/m');
    expect(b.list()).toMatchObject([{ phase: 'failed', message: 'hub answered 404 for org/m', total: 9 }]);
  });
});
