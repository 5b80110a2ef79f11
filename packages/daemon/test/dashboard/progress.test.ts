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
