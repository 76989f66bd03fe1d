#!/usr/bin/env bash
# The test command: unit and integration tests of every crate in the
# workspace (the service, the benchmark harness, the provider fakes) against
# the local Postgres (127.0.0.1:5432, or TEST_DATABASE_SERVER). Each test
# creates its own database and drops it. Arguments go to `cargo test`; with
# `-p CRATE` only that crate's tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
scope=(--workspace)
for arg in "$@"; do
    case "$arg" in
        --) break ;;
        -p | -p* | --package | --package=*) scope=() ;;
    esac
done
exec cargo test --locked "${scope[@]}" --all-targets "$@"
