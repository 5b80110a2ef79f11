/**
 * The transport's shared Group conformance suite, run against the RDMA Group on the simulated fabric
 * (Apple mode: UC, frame-count rule, credit flow). Simulation only — no Thunderbolt hardware here.
 */
import { afterAll } from 'vitest';
import type { Group } from '../../src/group.js';
import { runGroupConformance } from '../../src/testing/conformance.js';
import { simMesh, type SimMesh } from './helpers.js';

const meshes: SimMesh[] = [];
afterAll(async () => {
  await Promise.all(meshes.map((m) => m.fabric.close()));
});

runGroupConformance(
  'RDMA over the simulated fabric (Apple rules)',
  async (size): Promise<Group[]> => {
    const mesh = await simMesh({ size, timeoutMs: 2000, depth: 4, sizeClasses: [4096, 16_384, 65_536, 262_144] });
    meshes.push(mesh);
    return mesh.groups;
  },
  // 8 MiB instead of 64 MiB for the large case: the simulation copies every byte in JavaScript twice.
  { sizes: [1, 2, 3, 4, 8], largeBytes: 8 << 20 },
);
