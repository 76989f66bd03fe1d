#!/usr/bin/env bash
# Validates docker-compose.yml without a Docker engine: against the Compose
# specification's JSON schema, and with docker-compose 1.29's own parser.
# (scripts/compose-smoke.sh runs the stack for real.)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/tools-venv
if [ ! -x "$venv/bin/check-jsonschema" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check check-jsonschema
fi
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml
if ! command -v docker-compose >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null) \
      || echo "warning: could not install docker-compose; schema check only"
  fi
fi
if command -v docker-compose >/dev/null; then
  # The secrets the file names must exist for `config` to resolve them.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp docker-compose.yml .env.example "$tmp/"
  cp -r deploy "$tmp/"
  cp deploy/mcp-connect.example.toml "$tmp/deploy/mcp-connect.toml"
  mkdir -p "$tmp/secrets/providers"
  for f in postgres_password service_db_password database_url keys metrics_token web_client_secret; do echo placeholder > "$tmp/secrets/$f"; done
  (cd "$tmp" && cp .env.example .env && docker-compose config -q)
  echo "docker-compose config: ok"
fi
