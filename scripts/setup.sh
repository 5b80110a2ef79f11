#!/usr/bin/env bash
# Installs what Orchard needs on a fresh machine with Node.js 20: pnpm and the workspace packages.
set -euo pipefail
cd "$(dirname "$0")/.."

# Optional: Mesa 25's lavapipe (a Vulkan driver that runs on the CPU) so the WebGPU kernels can be
# tested on machines without a GPU. Dawn needs Vulkan features Debian 12's own Mesa 22 lacks, so this
# takes mesa-vulkan-drivers from bookworm-backports. It only runs as root on Debian bookworm with apt,
# reuses the mirror of the machine's existing debian.sources entry (no host name lives in this repo),
# sets no environment globally (the GPU tests point Vulkan at lavapipe themselves), and any failure
# only prints a warning: the GPU tests then skip. ORCHARD_SKIP_MESA=1 turns it off.
install_lavapipe() {
  local sources=/etc/apt/sources.list.d/debian.sources
  local target=/etc/apt/sources.list.d/orchard-bookworm-backports.sources
  [ "${ORCHARD_SKIP_MESA:-0}" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  grep -qs '^VERSION_CODENAME=bookworm$' /etc/os-release || return 0
  local have
  have="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  if [ -n "$have" ] && dpkg --compare-versions "$have" ge 25; then return 0; fi
  if [ ! -f "$target" ]; then
    [ -f "$sources" ] || { echo "setup: no $sources to copy the Debian mirror from" >&2; return 1; }
    # URIs of the first deb822 stanza that carries the plain "bookworm" suite.
    local uris
    uris="$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ && !/bookworm-security/ {
              if (match($0, /URIs:[^\n]*/)) { u = substr($0, RSTART + 5, RLENGTH - 5); gsub(/^[ \t]+|[ \t]+$/, "", u); print u; exit } }' "$sources")"
    [ -n "$uris" ] || { echo "setup: no bookworm URIs in $sources" >&2; return 1; }
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uris" >"$target"
  fi
  apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
}
if ! install_lavapipe; then
  echo "setup: warning: could not install Mesa 25 lavapipe from bookworm-backports; WebGPU tests will skip" >&2
fi

# Optional: Debian's libibverbs-dev, so `pnpm install` can build the RDMA verbs addon
# (packages/transport/native) against infiniband/verbs.h. Root on Debian with apt only; any failure just
# prints a warning and Orchard runs its links on TCP. ORCHARD_SKIP_VERBS=1 turns it off.
install_verbs_headers() {
  [ "${ORCHARD_SKIP_VERBS:-0}" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  [ -f /etc/debian_version ] || return 0
  [ -f /usr/include/infiniband/verbs.h ] && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libibverbs-dev >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libibverbs-dev >/dev/null 2>&1; }
}
if ! install_verbs_headers; then
  echo "setup: warning: could not install libibverbs-dev; the RDMA addon will not build (links use TCP)" >&2
fi

# Optional: Debian's Chromium, for the dashboard's browser tests (test/dashboard, driven by playwright-core).
# Root on Debian with apt only; any failure just prints a warning and those tests skip with the reason
# (ORCHARD_REQUIRE_BROWSER_TESTS=1 makes them fail instead). ORCHARD_SKIP_CHROMIUM=1 turns it off.
install_chromium() {
  [ "${ORCHARD_SKIP_CHROMIUM:-0}" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  [ -f /etc/debian_version ] || return 0
  [ -x /usr/bin/chromium ] && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }
}
if ! install_chromium; then
  echo "setup: warning: could not install Debian's chromium; the dashboard browser tests will skip" >&2
fi

# Optional: Debian's python3-torch (with OpenBLAS), for the engine's float64 PyTorch reference test
# (packages/engine/test/torch-reference.test.ts runs /usr/bin/python3). Root on Debian with apt only; any
# failure just prints a warning and that test skips with the reason. ORCHARD_SKIP_TORCH=1 turns it off.
install_torch() {
  [ "${ORCHARD_SKIP_TORCH:-0}" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  [ -f /etc/debian_version ] || return 0
  /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1 && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null 2>&1; }
}
if ! install_torch; then
  echo "setup: warning: could not install Debian's python3-torch; the PyTorch reference test will skip" >&2
fi

# Optional: Debian's tmux, a pseudo-terminal for the tests that drive `orchard chat` as a person would
# (packages/daemon/test/cli/chat-pty.test.ts). Root on Debian with apt only; without it those tests skip.
install_tmux() {
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  [ -f /etc/debian_version ] || return 0
  command -v tmux >/dev/null 2>&1 && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null 2>&1; }
}
if ! install_tmux; then
  echo "setup: warning: could not install Debian's tmux; the terminal chat tests will skip" >&2
fi

# Optional: Debian's nftables, for the network test's NAT routers (test/network/internet.test.ts: home LANs
# behind MASQUERADE in network namespaces). Root on Debian with apt only; any failure just prints a warning and
# that test skips. ORCHARD_SKIP_NFT=1 turns it off.
install_nft() {
  [ "${ORCHARD_SKIP_NFT:-0}" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  [ -f /etc/debian_version ] || return 0
  command -v nft >/dev/null 2>&1 && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null 2>&1; }
}
if ! install_nft; then
  echo "setup: warning: could not install Debian's nftables; the network NAT test will skip" >&2
fi

if ! command -v pnpm >/dev/null 2>&1; then
  npm install -g pnpm@10 >/dev/null
fi
pnpm install --frozen-lockfile
