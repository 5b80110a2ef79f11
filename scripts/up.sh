#!/usr/bin/env bash
# The README's first command: set up Orchard on this machine and start the daemon in the foreground.
# It serves the bundled demo model (models/orchard-demo) through the OpenAI-compatible API on
# http://127.0.0.1:52415 and the dashboard at the same address; other daemons on the LAN join it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "orchard: starting the daemon — dashboard and API on http://127.0.0.1:52415 (chat from another terminal: pnpm orchard chat)" >&2
exec pnpm -s orchard start "$@"
