/**
 * `tsx test/harness/skip-summary-main.ts REPORT.json...`: the closing lines of scripts/test.sh. Missing
 * or empty reports (a run that died before writing one) are left out; exits 1 when a skip must fail
 * the run (see skip-summary.ts).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, summaryLines, type VitestJsonReport } from './skip-summary.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const reports: VitestJsonReport[] = process.argv
  .slice(2)
  .filter((file) => existsSync(file) && statSync(file).size > 0)
  .map((file) => JSON.parse(readFileSync(file, 'utf8')) as VitestJsonReport);
const summary = summarize(reports, { root: REPO_ROOT, env: process.env });
for (const line of summaryLines(summary)) console.log(line);
process.exit(summary.ok ? 0 : 1);
