import type { Command } from 'commander';
import { resolve } from 'node:path';
import { clusterKeyFingerprint, writeClusterKey } from '../../identity/cluster-key.js';
import { CliError } from '../errors.js';

/** `orchard key new FILE`: writes a cluster key for a private pod. */
export function registerKey(program: Command): void {
  const key = program.command('key').description('cluster keys for private pods');
  key
    .command('new')
    .description('write a new cluster key; copy it to every machine of the pod and start each with --cluster-key FILE')
    .argument('[file]', 'where to write the key', 'orchard-cluster.key')
    .option('--force', 'overwrite an existing file')
    .action((file: string, opts: { force?: boolean }) => {
      const path = resolve(file);
      let bytes: Uint8Array;
      try {
        bytes = writeClusterKey(path, opts.force);
      } catch (err) {
        throw new CliError((err as Error).message, 1);
      }
      process.stdout.write(`wrote cluster key ${path} (id ${clusterKeyFingerprint(bytes)}); keep it secret, start daemons with --cluster-key ${path}\n`);
    });
}
