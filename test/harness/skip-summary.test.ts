/**
 * The summary of `pnpm test`: skips grouped by reason, and the verdict .ci/run relies on — a skip of a
 * required suite, or one nobody named in CI, fails; the expected twins of tests that ran do not.
 * Reports are shaped exactly as vitest 4's JSON reporter writes them (the real one is checked too).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { summarize, summaryLines, type VitestJsonReport } from './skip-summary.js';

const ROOT = '/repo';
type Result = VitestJsonReport['testResults'][number];
const file = (path: string, tests: [string[], string, string][], status = 'passed', message = ''): Result => ({
  name: `${ROOT}/${path}`,
  status,
  message,
  assertionResults: tests.map(([ancestorTitles, title, s]) => ({ ancestorTitles, title, status: s })),
});
const report = (...testResults: Result[]): VitestJsonReport => ({
  numPassedTests: testResults.flatMap((f) => f.assertionResults).filter((t) => t.status === 'passed').length,
  numFailedTests: testResults.flatMap((f) => f.assertionResults).filter((t) => t.status === 'failed').length,
  numFailedTestSuites: testResults.filter((f) => f.status === 'failed').length,
  testResults,
});

const run = report(
  file('test/daemon/pod.test.ts', [
    [['daemon pod across network namespaces'], 'forms a pod', 'skipped'],
    [['teardown'], 'leaves nothing', 'skipped'],
  ]),
  file('packages/engine/test/torch-reference.test.ts', [[['llama GQA vs PyTorch'], 'logits match', 'skipped']]),
  file('packages/engine/test/gpu/shard.test.ts', [[['GPU shard vs CPU forward (skipped: no Vulkan driver (install mesa-vulkan-drivers))'], 'equals', 'skipped']]),
  file('packages/daemon/test/data-dir.test.ts', [
    [['data dir problems'], 'a read-only mount (as root): named', 'passed'],
    [['data dir problems'], 'a directory this user may not write (as non-root)', 'skipped'],
  ]),
  file('packages/daemon/test/service/service.test.ts', [
    [['systemd'], 'renders the unit', 'passed'],
    [['systemd'], 'passes systemd-analyze verify', 'skipped'],
  ]),
);

describe('test summary', () => {
  it('groups skips by reason: a reason in the title first, else the rule for the file', () => {
    const s = summarize([run], { root: ROOT, env: {} });
    expect(s).toMatchObject({ passed: 2, failed: 0, skipped: 6, ok: true });
    const byReason = Object.fromEntries(s.groups.map((g) => [g.reason, [g.tests, g.files]]));
    expect(byReason).toEqual({
      'network namespaces (root, iproute2; nft and tc for the NAT and fault tests)': [2, ['test/daemon/pod.test.ts']],
      'PyTorch (Debian python3-torch)': [1, ['packages/engine/test/torch-reference.test.ts']],
      'no Vulkan driver (install mesa-vulkan-drivers)': [1, ['packages/engine/test/gpu/shard.test.ts']],
      'the other user case (root vs non-root) of a data-dir test that ran': [1, ['packages/daemon/test/data-dir.test.ts']],
      'systemd-analyze (Debian package systemd)': [1, ['packages/daemon/test/service/service.test.ts']],
    });
    expect(summaryLines(s)[0]).toBe('2 passed, 0 failed, 6 skipped');
  });

  it('a required suite that skips fails the run, naming the variable; the others stay listed', () => {
    const s = summarize([run], { root: ROOT, env: { ORCHARD_REQUIRE_TORCH_TESTS: '1', ORCHARD_REQUIRE_NETNS_TESTS: '1' } });
    expect(s.ok).toBe(false);
    expect(s.groups.filter((g) => g.fails).map((g) => g.require).sort()).toEqual(['ORCHARD_REQUIRE_NETNS_TESTS', 'ORCHARD_REQUIRE_TORCH_TESTS']);
    const lines = summaryLines(s).join('\n');
    expect(lines).toContain('skipped 1 for PyTorch (Debian python3-torch) — FAILS: ORCHARD_REQUIRE_TORCH_TESTS=1 requires it');
    expect(lines).toContain('skipped 1 for systemd-analyze (Debian package systemd): packages/daemon/test/service/service.test.ts');
  });

  it('in CI an expected skip passes, an unnamed one fails', () => {
    const ci = { CI: 'true', ORCHARD_REQUIRE_SYSTEMD_ANALYZE: '1', ORCHARD_REQUIRE_NETNS_TESTS: '1', ORCHARD_REQUIRE_TORCH_TESTS: '1', ORCHARD_REQUIRE_GPU_TESTS: '1' };
    const clean = report(file('packages/daemon/test/data-dir.test.ts', [[['data dir problems'], 'a directory this user may not write (as non-root)', 'skipped']]));
    expect(summarize([clean], { root: ROOT, env: ci })).toMatchObject({ ok: true, skipped: 1 });
    const stray = report(file('packages/daemon/test/new-thing.test.ts', [[['new thing'], 'needs a gadget', 'skipped']]));
    const s = summarize([clean, stray], { root: ROOT, env: ci });
    expect(s.ok).toBe(false);
    expect(summaryLines(s)).toContain(
      '  skipped 1 for no reason given (packages/daemon/test/new-thing.test.ts) — FAILS: CI allows only named skips: packages/daemon/test/new-thing.test.ts',
    );
  });

  it('the fault suites (partition, lossy link) skip under the namespace rule, so CI requires them', () => {
    const faults = report(
      file('test/daemon/partition.test.ts', [[['a partition that heals'], '20 s cut, heal', 'skipped']]),
      file('test/daemon/lossy-link.test.ts', [[['a lossy, rate-capped link'], 'every stream completes', 'skipped']]),
    );
    const s = summarize([faults], { root: ROOT, env: { ORCHARD_REQUIRE_NETNS_TESTS: '1' } });
    expect(s.ok).toBe(false);
    expect(s.groups).toEqual([expect.objectContaining({ require: 'ORCHARD_REQUIRE_NETNS_TESTS', tests: 2, fails: true })]);
  });

  it('a file that failed before any test ran (an ORCHARD_REQUIRE_* throw) is counted', () => {
    const dead = report(file('test/transport/netns.test.ts', [], 'failed', 'ORCHARD_REQUIRE_NETNS_TESTS=1 but network namespaces need root'));
    expect(summaryLines(summarize([dead], { root: ROOT, env: {} }))[0]).toBe('0 passed, 0 failed, 0 skipped, 1 test file failed to run');
  });

  it("reads vitest's own JSON report of a real skip", () => {
    const dir = mkdtempSync(join(tmpdir(), 'skip-summary-'));
    try {
      const out = join(dir, 'report.json');
      // data-dir's root/non-root twins: exactly one of them skips on any machine.
      const r = spawnSync('pnpm', ['-s', 'exec', 'vitest', 'run', 'packages/daemon/test/data-dir.test.ts', '--reporter=json', `--outputFile.json=${out}`], {
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      const s = summarize([JSON.parse(readFileSync(out, 'utf8')) as VitestJsonReport], { root: process.cwd(), env: { CI: 'true' } });
      expect(s.skipped).toBe(1);
      expect(s.groups).toEqual([expect.objectContaining({ reason: 'the other user case (root vs non-root) of a data-dir test that ran', fails: false })]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
