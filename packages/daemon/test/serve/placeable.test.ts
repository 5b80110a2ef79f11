import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { Cluster } from '@orchard/partitioner';
import { InstanceManager, type ManagerDeps } from '../../src/instances/manager.js';

const dataDir = mkdtempSync(join(tmpdir(), 'orchard-placeable-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const node = (id: string) => ({ id, memoryBytes: 64 * 2 ** 30, availableBytes: 32 * 2 ** 30, memoryBandwidthGBps: 100, tflops: 1 });
const cluster: Cluster = {
  nodes: [node('self'), node('b'), node('c')],
  links: [
    { a: 'self', b: 'b', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
    { a: 'self', b: 'c', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
    { a: 'b', b: 'c', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
  ],
};

function manager(heard: Record<string, number>): InstanceManager {
  const deps: ManagerDeps = {
    selfId: 'self',
    log: pino({ level: 'silent' }),
    dataDir,
    state: () => ({ nodes: {}, instances: {} }) as unknown as ReturnType<ManagerDeps['state']>,
    cluster: () => cluster,
    isCoordinator: () => true,
    propose: () => true,
    publish: () => {},
    heardAt: (peer) => heard[peer],
    suspectAfterMs: 2500,
  };
  return new InstanceManager(deps);
}

describe('placement skips nodes that stopped answering heartbeats', () => {
  it('a node silent past suspectAfterMs is left out, even while the shared state still lists it', () => {
    const now = Date.now();
    const fresh = manager({ b: now - 100, c: now - 200 });
    expect(fresh.planFor('orchard-demo', { strategy: 'pipeline', nodes: 3 }).plan.ranks.sort()).toEqual(['b', 'c', 'self']);

    const bSilent = manager({ b: now - 4000, c: now - 200 });
    const plan = bSilent.planFor('orchard-demo', { strategy: 'pipeline', nodes: 2 }).plan;
    expect(plan.ranks).not.toContain('b');
    expect(() => bSilent.planFor('orchard-demo', { strategy: 'pipeline', nodes: 3 })).toThrow(/needs 3 live nodes; the pod has 2/);
  });
});
