/**
 * `pnpm bench:transport [--json] [--quick] [--no-encryption] [--rdma-sim]` — see run.ts for what is measured.
 * `pnpm bench:transport --threshold` — the direct/ring crossover measurement (threshold.ts).
 * Not a test: prints numbers and ratios, never fails on them.
 */
import { formatTable, runTransportBench } from './run.js';

const args = new Set(process.argv.slice(2));
if (args.has('--threshold')) {
  await import('./threshold.js');
  process.exit(0);
}
const json = args.has('--json');
const result = await runTransportBench({
  quick: args.has('--quick'),
  encryption: !args.has('--no-encryption'),
  rdmaSim: args.has('--rdma-sim'),
  log: json ? undefined : (l) => process.stderr.write(`${l}\n`),
});
process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${formatTable(result)}\n`);
