/**
 * The closing lines of `pnpm test` (scripts/test.sh): passed, failed and skipped counts from vitest's
 * JSON reports, every skip grouped under the reason it skipped, and the verdict CI needs — a skip of a
 * suite this machine could run is a failure when its ORCHARD_REQUIRE_* variable is set, and a skip
 * nobody named is a failure in CI (so a new suite cannot start skipping unnoticed).
 *
 * A skip's reason is, first, the text after "skipped: " in its own or a parent's title (the GPU
 * suites write it there); else the first rule below whose file (and title, where given) matches.
 * Pure: reports and environment in, lines and verdict out (skip-summary-main.ts reads the files).
 */

/** The parts of vitest's JSON reporter output this reads. */
export interface VitestJsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numFailedTestSuites: number;
  testResults: {
    name: string;
    status: string;
    message?: string;
    assertionResults: { ancestorTitles: string[]; title: string; status: string }[];
  }[];
}

export interface SkipRule {
  /** Matched against the test file's path relative to the repository root. */
  file: RegExp;
  /** Matched against the test's full title, where only some tests of the file skip for this reason. */
  title?: RegExp;
  reason: string;
  /** The variable that turns this skip into a failure (.ci/run sets it). */
  require?: string;
  /**
   * Why the skip is expected even in CI: a test for hardware this machine lacks, or the other branch of
   * a test that ran (root vs non-root). Such skips never fail the run.
   */
  expected?: string;
}

const NETNS = 'network namespaces (root, iproute2; nft and tc for the NAT and fault tests)';

/** Skips whose tests do not carry their reason in a title. */
export const SKIP_RULES: readonly SkipRule[] = [
  // Expected skips first: they are narrower than the file-wide rules below.
  {
    file: /^packages\/daemon\/test\/data-dir\.test\.ts$/,
    title: /\(as (non-)?root\)/,
    reason: 'the other user case (root vs non-root) of a data-dir test that ran',
    expected: 'its twin ran as this user',
  },
  {
    file: /^packages\/(engine\/test\/gpu|daemon\/test\/profile)\//,
    title: /no hardware adapter|software adapter/,
    reason: 'this machine has a hardware GPU (the no-hardware case)',
    expected: 'hardware this machine has',
  },
  {
    file: /^packages\/daemon\/test\/serve\/rdma-data-plane\.test\.ts$/,
    title: /no addon, library or device/,
    reason: 'the RDMA addon is ready here (the no-RDMA fallback case)',
    expected: 'hardware this machine has',
  },
  {
    file: /^test\/daemon\/pull-resume\.test\.ts$/,
    title: /disk cannot hold/,
    reason: 'root (the test mounts a 1 MiB tmpfs)',
    require: 'ORCHARD_REQUIRE_NETNS_TESTS',
  },
  { file: /^test\/dashboard\/pod\.test\.ts$/, reason: `${NETNS} and Chromium`, require: 'ORCHARD_REQUIRE_NETNS_TESTS' },
  {
    file: /^test\/(harness\/netns|daemon\/(pod|weights|hub-formats|partition|lossy-link)|serve\/(serve-pod|data-plane-encryption)|transport\/netns|network\/internet)\.test\.ts$/,
    reason: NETNS,
    require: 'ORCHARD_REQUIRE_NETNS_TESTS',
  },
  { file: /^test\/dashboard\//, reason: 'Chromium (Debian package chromium)', require: 'ORCHARD_REQUIRE_BROWSER_TESTS' },
  { file: /^test\/oracle(-quant)?\//, reason: 'the llama.cpp oracle (tools/llama-oracle)', require: 'ORCHARD_REQUIRE_ORACLE' },
  {
    file: /^packages\/engine\/test\/(torch-reference|moe\/topk)\.test\.ts$/,
    reason: 'PyTorch (Debian python3-torch)',
    require: 'ORCHARD_REQUIRE_TORCH_TESTS',
  },
  { file: /^packages\/daemon\/test\/cli\/(chat-pty|start-log)\.test\.ts$/, reason: 'tmux (Debian package tmux)', require: 'ORCHARD_REQUIRE_TMUX_TESTS' },
  {
    file: /^packages\/daemon\/test\/service\/service\.test\.ts$/,
    title: /systemd-analyze/,
    reason: 'systemd-analyze (Debian package systemd)',
    require: 'ORCHARD_REQUIRE_SYSTEMD_ANALYZE',
  },
  {
    file: /^packages\/transport\/test\/rdma\/addon\.test\.ts$/,
    reason: 'the verbs headers and a C++ compiler to build the RDMA addon (libibverbs-dev, g++)',
    require: 'ORCHARD_REQUIRE_RDMA_ADDON_TESTS',
  },
  {
    file: /^packages\/engine\/test\/gpu\/gpu-bench\.test\.ts$/,
    reason: "llama.cpp's Vulkan build (installed with the oracle)",
    require: 'ORCHARD_REQUIRE_ORACLE',
  },
  {
    file: /^packages\/(engine\/test\/gpu\/|daemon\/test\/(daemon-gpu|serve\/gpu-rank|profile\/gpu-backend)\.test\.ts$)/,
    reason: 'a Vulkan adapter (Mesa lavapipe)',
    require: 'ORCHARD_REQUIRE_GPU_TESTS',
  },
];

export interface SkipGroup {
  reason: string;
  tests: number;
  files: string[];
  /** The variable that makes this group fail, when it is set. */
  require?: string;
  expected?: string;
  /** True when this group fails the run under the given environment. */
  fails: boolean;
}

export interface Summary {
  passed: number;
  failed: number;
  /** Files that failed outside any test (an import error, an ORCHARD_REQUIRE_* throw at collection). */
  failedFiles: number;
  skipped: number;
  groups: SkipGroup[];
  /** False when a skip must fail the run (see SkipGroup.fails). */
  ok: boolean;
}

// Written as `name (skipped: REASON)` at the end of a title; the reason may hold parentheses itself.
const TITLE_REASON = /\(skipped: (.*)\)\s*$/;

function relative(file: string, root: string): string {
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return file.startsWith(prefix) ? file.slice(prefix.length) : file;
}

/** Groups every skipped test of the reports by reason and decides whether the skips fail the run. */
export function summarize(
  reports: readonly VitestJsonReport[],
  options: { root: string; env: Record<string, string | undefined>; rules?: readonly SkipRule[] },
): Summary {
  const rules = options.rules ?? SKIP_RULES;
  const ci = options.env.CI === 'true' || options.env.CI === '1';
  const groups = new Map<string, SkipGroup>();
  let passed = 0;
  let failed = 0;
  let failedFiles = 0;
  let skipped = 0;
  for (const report of reports) {
    passed += report.numPassedTests;
    failed += report.numFailedTests;
    for (const file of report.testResults) {
      const path = relative(file.name, options.root);
      if (file.status === 'failed' && !file.assertionResults.some((t) => t.status === 'failed')) failedFiles++;
      for (const test of file.assertionResults) {
        if (test.status !== 'skipped' && test.status !== 'pending' && test.status !== 'todo') continue;
        skipped++;
        const title = [...test.ancestorTitles, test.title].join(' › ');
        const named = [...test.ancestorTitles, test.title].map((t) => TITLE_REASON.exec(t)?.[1]?.trim()).find(Boolean);
        const rule = rules.find((r) => r.file.test(path) && (!r.title || r.title.test(title)));
        const reason = named ?? rule?.reason ?? `no reason given (${path})`;
        let group = groups.get(reason);
        if (!group) {
          const require = rule?.require;
          const expected = rule?.expected;
          // In CI a skip no rule accounts for is one nobody decided to allow.
          const fails = !expected && ((require !== undefined && options.env[require] === '1') || (ci && !rule));
          group = { reason, tests: 0, files: [], require, expected, fails };
          groups.set(reason, group);
        }
        group.tests++;
        if (!group.files.includes(path)) group.files.push(path);
      }
    }
  }
  const list = [...groups.values()].sort((a, b) => b.tests - a.tests);
  return { passed, failed, failedFiles, skipped, groups: list, ok: !list.some((g) => g.fails) };
}

/** The lines printed at the end of `pnpm test`. */
export function summaryLines(summary: Summary): string[] {
  const files = summary.failedFiles ? `, ${summary.failedFiles} test file${summary.failedFiles === 1 ? '' : 's'} failed to run` : '';
  const lines = [`${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped${files}`];
  for (const g of summary.groups) {
    const why = g.fails ? (g.require ? ` — FAILS: ${g.require}=1 requires it` : ' — FAILS: CI allows only named skips') : g.expected ? ` (expected: ${g.expected})` : '';
    lines.push(`  skipped ${g.tests} for ${g.reason}${why}: ${g.files.join(', ')}`);
  }
  if (!summary.ok) lines.push('skips that must not happen here: install what they name (scripts/test.sh does as root on Debian) or run where they can run');
  return lines;
}
