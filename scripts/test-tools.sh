#!/usr/bin/env bash
# What the tests need beyond what running Orchard needs, installed by `pnpm test` (scripts/test.sh) and
# never by the run command (scripts/up.sh → scripts/setup.sh). It first says what is missing and what it
# will install; then, as root on Debian with apt, installs it:
#   chromium              the dashboard's browser tests (test/dashboard)
#   python3-torch         the engine's float64 PyTorch reference (packages/engine/test/torch-reference.test.ts)
#   nftables              the NAT routers of the namespace internet (test/network/internet.test.ts)
#   libibverbs-dev        the RDMA verbs addon's build test (packages/transport/test/rdma); a Linux box with
#                         RDMA hardware that wants the addon for serving installs it before `pnpm install`
#   python3-jinja2        the chat templates' reference rendering (packages/engine/test/chat-template-jinja2.test.ts)
#   tmux                  a pseudo-terminal for the tests that drive `orchard chat` as a person would
#   mesa-vulkan-drivers   Mesa 25's lavapipe (a CPU Vulkan driver) from bookworm-backports, for the WebGPU tests
# and, on any system, the llama.cpp oracle (tools/llama-oracle: node-llama-cpp, ~730 MB from npm, once).
# Anything it cannot install is named with its fix, and those suites skip saying why (CI's ORCHARD_REQUIRE_*
# variables make such a skip a failure). ORCHARD_SKIP_TEST_TOOLS=1 installs nothing; ORCHARD_SKIP_<TOOL>=1
# (CHROMIUM, TORCH, NFT, VERBS, JINJA2, TMUX, MESA, ORACLE_INSTALL) leaves one out.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${ORCHARD_SKIP_TEST_TOOLS:-0}" = 1 ] && exit 0

debian_root() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ]; }
skip() { local v="ORCHARD_SKIP_$1"; [ "${!v:-0}" = 1 ]; }

have_mesa25() {
  local have
  have="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  [ -n "$have" ] && dpkg --compare-versions "$have" ge 25
}
have_torch() { "${ORCHARD_TORCH_PYTHON:-/usr/bin/python3}" -c 'import torch, numpy' >/dev/null 2>&1; }

# name|apt packages|present check|what it is for
missing=()
want() { skip "$1" || eval "$3" || missing+=("$1|$2|$4"); }
want CHROMIUM chromium '[ -x /usr/bin/chromium ]' 'dashboard browser tests'
want TORCH 'python3-torch libopenblas0-pthread' have_torch 'PyTorch reference tests'
want NFT nftables 'command -v nft >/dev/null 2>&1' 'namespace internet (NAT) test'
want VERBS libibverbs-dev '[ -f /usr/include/infiniband/verbs.h ]' 'RDMA addon build test'
want JINJA2 python3-jinja2 "/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1" 'chat template reference (jinja2) test'
want TMUX tmux 'command -v tmux >/dev/null 2>&1' 'terminal chat tests'
if grep -qs '^VERSION_CODENAME=bookworm$' /etc/os-release; then
  want MESA 'mesa-vulkan-drivers (bookworm-backports)' have_mesa25 'WebGPU tests (lavapipe)'
fi
oracle=0
if ! skip ORACLE_INSTALL && [ ! -d tools/llama-oracle/node_modules/node-llama-cpp ]; then oracle=1; fi

if [ ${#missing[@]} -eq 0 ] && [ "$oracle" = 0 ]; then exit 0; fi
echo "test: some suites need what this machine lacks; installing it now (once) where it can:" >&2
for m in ${missing[@]+"${missing[@]}"}; do IFS='|' read -r _ pkgs why <<<"$m"; echo "  $pkgs — $why" >&2; done
[ "$oracle" = 1 ] && echo "  the llama.cpp oracle (tools/llama-oracle, node-llama-cpp, ~730 MB from npm) — oracle tests" >&2

# Mesa 25's lavapipe: Dawn needs Vulkan features Debian 12's own Mesa 22 lacks, so this takes
# mesa-vulkan-drivers from bookworm-backports. It reuses the mirror of the machine's existing
# debian.sources entry (no host name lives in this repo) and sets no environment globally (the GPU
# tests point Vulkan at lavapipe themselves).
install_lavapipe() {
  local sources=/etc/apt/sources.list.d/debian.sources
  local target=/etc/apt/sources.list.d/orchard-bookworm-backports.sources
  if [ ! -f "$target" ]; then
    [ -f "$sources" ] || { echo "test: no $sources to copy the Debian mirror from" >&2; return 1; }
    # URIs of the first deb822 stanza that carries the plain "bookworm" suite.
    local uris
    uris="$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ && !/bookworm-security/ {
              if (match($0, /URIs:[^\n]*/)) { u = substr($0, RSTART + 5, RLENGTH - 5); gsub(/^[ \t]+|[ \t]+$/, "", u); print u; exit } }' "$sources")"
    [ -n "$uris" ] || { echo "test: no bookworm URIs in $sources" >&2; return 1; }
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uris" >"$target"
  fi
  apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
}

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; }
}

for m in ${missing[@]+"${missing[@]}"}; do
  IFS='|' read -r name pkgs why <<<"$m"
  if ! debian_root; then
    echo "test: warning: not root on Debian, so not installing $pkgs: the $why will skip (install it yourself)" >&2
    continue
  fi
  if [ "$name" = MESA ]; then
    install_lavapipe || echo "test: warning: could not install Mesa 25 lavapipe from bookworm-backports; the $why will skip" >&2
  else
    # shellcheck disable=SC2086 # a list of package names
    apt_install $pkgs || echo "test: warning: could not install $pkgs; the $why will skip" >&2
  fi
done

if [ "$oracle" = 1 ]; then
  npm ci --prefix tools/llama-oracle --no-audit --no-fund >/dev/null ||
    echo "test: warning: could not install the llama.cpp oracle (tools/llama-oracle); the oracle tests will skip" >&2
fi
