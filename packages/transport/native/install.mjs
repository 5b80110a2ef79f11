// Builds the optional RDMA verbs addon at install time. It never fails the install: where it cannot be
// built (no compiler, no Node headers, no network for node-gyp's header download) Orchard runs on TCP and
// the loader reports "RDMA addon not built". Set ORCHARD_SKIP_RDMA_BUILD=1 to skip it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = path.join(here, 'build-log.txt');

function done(line) {
  console.log(`@orchard/transport: ${line}`);
  process.exit(0);
}

if (process.env.ORCHARD_SKIP_RDMA_BUILD) done('RDMA addon build skipped (ORCHARD_SKIP_RDMA_BUILD)');
let gyp;
try {
  gyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
} catch {
  done('RDMA addon not built: node-gyp is not installed; links will use TCP');
}
const args = [gyp, 'rebuild'];
// Use the running Node's own headers when they are installed next to it: no download needed.
const prefix = path.resolve(path.dirname(process.execPath), '..');
if (existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
const r = spawnSync(process.execPath, args, { cwd: here, encoding: 'utf8', timeout: 10 * 60_000 });
try {
  mkdirSync(here, { recursive: true });
  writeFileSync(log, `${r.stdout ?? ''}\n${r.stderr ?? ''}\n${r.error ? String(r.error) : ''}`);
} catch {
  // the log is a courtesy
}
if (r.status === 0) done('RDMA addon built (native/build/Release/orchard_verbs.node)');
done(`RDMA addon not built (node-gyp exit ${r.status ?? r.signal}; see native/build-log.txt); links will use TCP`);
