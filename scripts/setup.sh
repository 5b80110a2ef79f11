#!/usr/bin/env bash
# Installs what Orchard needs on a fresh machine with Node.js 20: pnpm and the workspace packages.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v pnpm >/dev/null 2>&1; then
  npm install -g pnpm@10 >/dev/null
fi
pnpm install --frozen-lockfile
