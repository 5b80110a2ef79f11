import type { Command } from 'commander';
import { formatTable, runTransportBench } from '@orchard/transport/bench';

/**
 * `orchard bench transport [--json] [--quick] [--no-encryption] [--rdma-sim]`: the TCP data plane between 2 and
 * 3 local processes against raw node:net measured in the same run. `--json` prints exactly one
 * object: {"baseline":{"pingPongUs","bulkMBps"},"lines":[{"name","value","unit","ratio"}]}.
 */
export function registerBenchTransport(bench: Command): void {
  bench
    .command('transport')
    .description('TCP data plane vs raw sockets on loopback: all-reduce latency, transfer and ring bus bandwidth')
    .option('--json', 'print one JSON object (stable contract) instead of a table')
    .option('--quick', 'fewer iterations (noisier numbers)')
    .option('--no-encryption', 'skip the encrypted-transfer lines')
    .option('--rdma-sim', 'append the RDMA protocol lines measured on the simulated fabric')
    .action(async (opts: { json?: boolean; quick?: boolean; encryption: boolean; rdmaSim?: boolean }) => {
      const result = await runTransportBench({
        quick: Boolean(opts.quick),
        encryption: opts.encryption,
        rdmaSim: Boolean(opts.rdmaSim),
        log: opts.json ? undefined : (line) => process.stderr.write(`${line}\n`),
      });
      process.stdout.write(opts.json ? `${JSON.stringify(result)}\n` : `${formatTable(result)}\n`);
    });
}
