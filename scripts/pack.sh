#!/usr/bin/env bash
# Packs the installable Orchard: dist/orchard-VERSION.tgz (or into the folder given), which installs with
#   npm install -g ./dist/orchard-VERSION.tgz      # then: orchard start, orchard service install
# on a machine with Node.js 20 and no checkout, no pnpm. Needs this checkout set up (scripts/setup.sh).
# How the tarball is laid out and why: scripts/pack.ts. Prints the tarball's path.
set -euo pipefail
cd "$(dirname "$0")/.."
exec node --import tsx scripts/pack.ts "$@"
