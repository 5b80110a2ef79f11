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
summary="$(mktemp -t orchard-vitest-XXXXXX.json)"
trap 'rm -f "$summary"' EXIT
status=0
pnpm -s exec vitest run --reporter=default --reporter=json --outputFile.json="$summary" "$@" || status=$?
# One plain closing line that any CI reader understands.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' "$summary" 2>/dev/null || true
exit "$status"
