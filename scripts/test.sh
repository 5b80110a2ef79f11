#!/usr/bin/env bash
# The README's test command (`pnpm test`): type-checks the workspace and runs every test.
# The llama.cpp oracle (node-llama-cpp, ~730 MB) lives outside the workspace install; it is installed
# here on first use so the oracle tests run instead of skipping. ORCHARD_SKIP_ORACLE_INSTALL=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${ORCHARD_SKIP_ORACLE_INSTALL:-0}" != 1 ] && [ ! -d tools/llama-oracle/node_modules/node-llama-cpp ]; then
  echo "test: installing the llama.cpp oracle (tools/llama-oracle, once)" >&2
  npm ci --prefix tools/llama-oracle --no-audit --no-fund >/dev/null
fi
pnpm -s typecheck
main_json="$(mktemp -t orchard-vitest-XXXXXX.json)"
gpu_json="$(mktemp -t orchard-vitest-gpu-XXXXXX.json)"
trap 'rm -f "$main_json" "$gpu_json"' EXIT
vitest_json() { pnpm -s exec vitest run --reporter=default --reporter=json --outputFile.json="$1" "${@:2}"; }
status=0
if [ $# -gt 0 ]; then
  vitest_json "$main_json" "$@" || status=$?
else
  # The engine's WebGPU suites run on their own after the rest, so lavapipe's render threads (one per
  # core) do not compete with the timing-sensitive network suites. (Workers driving Dawn used to die
  # now and then; the cause was a garbage-collected Dawn instance, fixed in kernels/gpu/context.ts.)
  vitest_json "$main_json" --exclude 'packages/engine/test/gpu/**' || status=$?
  vitest_json "$gpu_json" packages/engine/test/gpu || status=$?
fi
# One plain closing line that any CI reader understands.
node -e '
  const fs = require("fs");
  let p = 0, f = 0, s = 0;
  for (const file of process.argv.slice(1)) {
    if (!fs.existsSync(file) || fs.statSync(file).size === 0) continue;
    const r = JSON.parse(fs.readFileSync(file, "utf8"));
    p += r.numPassedTests; f += r.numFailedTests; s += r.numPendingTests + r.numTodoTests;
  }
  console.log(`${p} passed, ${f} failed, ${s} skipped`);
' "$main_json" "$gpu_json" 2>/dev/null || true
exit "$status"
