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
exec pnpm -s exec vitest run "$@"
