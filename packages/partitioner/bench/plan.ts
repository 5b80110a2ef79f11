/**
 * Planning time: a 16-node mixed cluster with Kimi K2 (1T parameters), against the 4x M3 Ultra
 * mesh measured in the same run as the baseline. The issue's budget is "well under a second".
 * Run: pnpm bench:plan
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, ClusterLink, ClusterNode } from '../src/cluster.js';
import { modelFromConfig, plan } from '../src/index.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const read = (p: string) => JSON.parse(readFileSync(`${root}${p}`, 'utf8'));
const GiB = 1024 ** 3;

/** Four TB5 RDMA meshes of four (Ultras, Maxes, two of Pros), all on one 10 GbE switch. */
function sixteenNodes(): Cluster {
  const nodes: ClusterNode[] = [];
  const add = (prefix: string, count: number, chip: string, memGiB: number, availGiB: number) => {
    for (let i = 1; i <= count; i++) nodes.push({ id: `${prefix}-${i}`, chip, memoryBytes: memGiB * GiB, availableBytes: availGiB * GiB });
  };
  add('ultra', 4, 'Apple M3 Ultra', 256, 240);
  add('max', 4, 'Apple M4 Max', 128, 112);
  add('pro', 8, 'Apple M4 Pro', 64, 56);
  const links: ClusterLink[] = [];
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) {
      const sameMesh = Math.floor(i / 4) === Math.floor(j / 4);
      links.push({ a: nodes[i].id, b: nodes[j].id, kind: 'ethernet', latencyUs: 100, bandwidthGbps: 10 });
      if (sameMesh) links.push({ a: nodes[i].id, b: nodes[j].id, kind: 'rdma', latencyUs: 8, bandwidthGbps: 80 });
    }
  }
  return { nodes, links };
}

/** Sixteen Mac minis (M4 Pro), RDMA inside quads, Ethernet across: Kimi needs 13 of them. */
function sixteenMinis(): Cluster {
  const nodes: ClusterNode[] = Array.from({ length: 16 }, (_, i) => ({
    id: `mini-${String(i + 1).padStart(2, '0')}`,
    chip: 'Apple M4 Pro',
    memoryBytes: 64 * GiB,
    availableBytes: (i % 3 === 0 ? 56 : 48) * GiB,
  }));
  const links: ClusterLink[] = [];
  for (let i = 0; i < 16; i++) {
    for (let j = i + 1; j < 16; j++) {
      links.push({ a: nodes[i].id, b: nodes[j].id, kind: 'ethernet', latencyUs: 100, bandwidthGbps: 10 });
      if (Math.floor(i / 4) === Math.floor(j / 4)) links.push({ a: nodes[i].id, b: nodes[j].id, kind: 'rdma', latencyUs: 8, bandwidthGbps: 80 });
    }
  }
  return { nodes, links };
}

function time(label: string, fn: () => unknown, runs: number): number {
  fn(); // warm up the JIT
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)];
  console.log(`${label.padEnd(44)} median ${median.toFixed(1).padStart(7)} ms   max ${samples[samples.length - 1].toFixed(1).padStart(7)} ms`);
  return median;
}

const kimi = modelFromConfig(read('packages/partitioner/test/fixtures/kimi-k2-thinking.json'));
const big = sixteenNodes();
const mesh = read('examples/clusters/4x-m3-ultra-tb5-rdma.json') as Cluster;

const base = time('baseline: 4x M3 Ultra, Kimi K2 1T', () => plan(kimi, mesh), 9);
const sixteen = time('16 nodes (4 Ultra, 4 Max, 8 Pro), Kimi K2 1T', () => plan(kimi, big), 9);
const minis = sixteenMinis();
const sixteenMini = time('16 Mac minis M4 Pro (RDMA quads), Kimi K2 1T', () => plan(kimi, minis), 9);
for (const [label, ms, c] of [['16 mixed', sixteen, big], ['16 minis', sixteenMini, minis]] as const) {
  const p = plan(kimi, c);
  console.log(`${label}: ${(ms / base).toFixed(2)}x the baseline; budget 1000 ms: ${ms < 1000 ? 'within' : 'EXCEEDED'}`);
  console.log(`  chosen: ${p.strategy}, ${p.stages.map((s) => `[${s.nodes.join('+')} ${s.layers[0]}-${s.layers[1]}]`).join(' ')}, ${p.predicted.decodeTokensPerSecond} tok/s`);
}
