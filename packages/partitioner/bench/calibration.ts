/**
 * Prints the cost model's decode predictions next to the published 4x M3 Ultra numbers
 * (shared/notes/published-measurements.md): exo = tensor parallel over RDMA, llama.cpp = pipeline
 * over TCP. Run: pnpm tsx packages/partitioner/bench/calibration.ts
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { calibrationRows } from '../test/calibration-data.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const rows = calibrationRows((p) => JSON.parse(readFileSync(`${root}${p}`, 'utf8')));
console.log('model                 nodes  layout          predicted  published  ratio');
for (const r of rows) {
  const ratio = r.published ? (r.predicted / r.published).toFixed(2) : '  - ';
  console.log(
    `${r.model.padEnd(22)}${String(r.nodes).padStart(5)}  ${r.layout.padEnd(14)}${r.predicted.toFixed(1).padStart(10)}${(r.published?.toFixed(1) ?? '-').padStart(11)}  ${ratio}`,
  );
}
