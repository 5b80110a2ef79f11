/**
 * The fake hub as a process of its own, for tests that need it inside a network namespace:
 *   node --import tsx test/harness/fake-hub-main.ts PORT ORG/NAME=DIR [ORG/NAME=DIR ...]
 * listens on 0.0.0.0:PORT, prints "ready" once listening; counters at GET /_stats.
 */
import { startFakeHub } from './fake-hub.js';

const [port, ...pairs] = process.argv.slice(2);
const repos = Object.fromEntries(pairs.map((p) => p.split('=') as [string, string]));
await startFakeHub(repos, {}, { host: '0.0.0.0', port: Number(port) });
process.stdout.write('ready\n');
