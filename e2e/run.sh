#!/usr/bin/env bash
# Runs the end-to-end suite: installs the peers if needed (setup.sh), builds
# the binary and the suite (one cargo invocation), then runs every scenario once against one world
# (oidc-provider x2, chromedriver, mcp-connect on its own database, all on
# 127.0.0.1 with free ports). Screenshots and logs: target/e2e/.
#
#   bash e2e/run.sh                    all scenarios
#   bash e2e/run.sh phishing           the scenarios whose name contains it
#
# Postgres must accept `postgres@127.0.0.1:5432` (TEST_DATABASE_SERVER for
# another). The suite and everything it starts run in a process group of
# their own, killed on exit whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

bash e2e/setup.sh

start=$(date +%s)
echo "==> e2e: building and running"
setsid cargo test --locked --test e2e -- --ignored --test-threads="${E2E_THREADS:-2}" "$@" &
suite=$!
trap 'kill -TERM -- "-$suite" 2>/dev/null || true' EXIT INT TERM
status=0
wait "$suite" || status=$?
trap - EXIT INT TERM
kill -TERM -- "-$suite" 2>/dev/null || true
echo "==> e2e: $(( $(date +%s) - start ))s in all (build included), exit $status"
exit "$status"
