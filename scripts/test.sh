#!/usr/bin/env bash
# The test command: unit and integration tests of every crate in the
# workspace (the service, the benchmark harness, the provider fakes) against
# the local Postgres (127.0.0.1:5432, or TEST_DATABASE_SERVER). Each test
# creates its own database and drops it.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --locked --workspace --all-targets "$@"
