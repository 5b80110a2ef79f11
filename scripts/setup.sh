#!/usr/bin/env bash
# Installs what running Orchard needs on a fresh machine with Node.js 20: pnpm and the workspace
# packages. Nothing else: the tools only the tests need (a browser, PyTorch, network and terminal tools,
# a Vulkan driver, the llama.cpp oracle) are installed by the test command (scripts/test-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v pnpm >/dev/null 2>&1; then
  echo "setup: installing pnpm 10 (npm install -g pnpm@10)" >&2
  npm install -g pnpm@10 >/dev/null
fi
pnpm install --frozen-lockfile
