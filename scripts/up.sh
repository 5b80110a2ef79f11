#!/usr/bin/env bash
# The README's first command: set up Orchard on this machine and start the daemon in the foreground.
# It serves the bundled demo model (models/orchard-demo) through the OpenAI-compatible API on
# http://127.0.0.1:52415 and the dashboard at the same address; other daemons on the LAN join it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Say the address the daemon will really use: --api-host/--api-port (either spelling), else the
# environment, else the defaults (a config file can still move it: the daemon's own log line says where).
host="${ORCHARD_API_HOST:-127.0.0.1}"
port="${ORCHARD_API_PORT:-52415}"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --api-port) port="${args[i + 1]:-$port}" ;;
    --api-port=*) port="${args[i]#--api-port=}" ;;
    --api-host) host="${args[i + 1]:-$host}" ;;
    --api-host=*) host="${args[i]#--api-host=}" ;;
  esac
done
case "$host" in *:*) host="[$host]" ;; esac
echo "orchard: starting the daemon — dashboard and API on http://$host:$port (chat from another terminal: pnpm orchard chat --url http://$host:$port)" >&2
exec pnpm -s orchard start "$@"
