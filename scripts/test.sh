#!/usr/bin/env bash
# The README's test command (`pnpm test`): installs what only the tests need (scripts/test-tools.sh says
# what, before it does), type-checks the workspace and runs every suite — or, with arguments, the vitest
# files or filters given. Ends with counts and every skip under its reason (test/harness/skip-summary.ts);
# a skip that CI's ORCHARD_REQUIRE_* variables forbid fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  echo "test: type-check, then every suite: about 25 minutes on a 2-core machine (the network-namespace," >&2
  echo "      browser, WebGPU and llama.cpp oracle suites are most of it); \`pnpm test FILE...\` runs some." >&2
fi
bash scripts/test-tools.sh
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
# Plain closing lines any CI reader understands: counts, then each skip's reason and files.
pnpm -s exec tsx test/harness/skip-summary-main.ts "$main_json" "$gpu_json" || { [ "$status" != 0 ] || status=1; }
exit "$status"
