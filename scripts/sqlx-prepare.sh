#!/usr/bin/env bash
# Writes .sqlx/, the offline data of the compile-time checked queries
# (sqlx::query! and friends in src/db/), so that a build needs no database.
#
#   bash scripts/sqlx-prepare.sh           regenerate .sqlx/ (commit the result)
#   bash scripts/sqlx-prepare.sh --check   fail if .sqlx/ is not what the
#                                          queries and migrations give (CI)
#
# How: a fresh database on the local Postgres (TEST_DATABASE_SERVER, as for
# the tests; default postgres://postgres@127.0.0.1:5432), migrations/ applied
# with psql, then `cargo check` with DATABASE_URL pointing at it: each macro
# asks Postgres to describe its statement and, as SQLX_OFFLINE_DIR is set,
# saves what it learnt there. The database is dropped at the end. Needs
# psql; no sqlx-cli.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

server=${TEST_DATABASE_SERVER:-postgres://postgres@127.0.0.1:5432}
db="sqlx_prepare_$(date +%s)_$$"
out=$(mktemp -d)
cleanup() {
  psql -q -d "$server/postgres" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT

psql -q -v ON_ERROR_STOP=1 -d "$server/postgres" -c "CREATE DATABASE \"$db\"" >/dev/null
for migration in migrations/*.sql; do
  # As sqlx's migrator runs them: each in its own transaction, unless the
  # file opts out with a first line of `-- no-transaction`.
  single=--single-transaction
  if head -n1 "$migration" | grep -q '^-- no-transaction'; then single=; fi
  psql -q -v ON_ERROR_STOP=1 $single -d "$server/$db" -f "$migration" >/dev/null
done

# The macros run again only when the crate is rebuilt: touch it.
touch src/lib.rs
if ! DATABASE_URL="$server/$db" SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$out" \
  cargo check --workspace --all-targets --locked --quiet; then
  echo "error: a checked query does not fit the schema of migrations/ (see above)" >&2
  exit 1
fi
# The next offline build must see the data, not the database: expand again.
touch src/lib.rs

if [ "$mode" = check ]; then
  if ! diff -r .sqlx "$out" >/dev/null 2>&1; then
    diff -r .sqlx "$out" >&2 || true
    echo "error: .sqlx/ is out of date with the queries in src/ or with migrations/." >&2
    echo "       Run scripts/sqlx-prepare.sh and commit .sqlx/." >&2
    exit 1
  fi
  echo ".sqlx/ is up to date ($(ls "$out" | wc -l) queries)"
else
  rm -rf .sqlx
  mkdir .sqlx
  cp "$out"/query-*.json .sqlx/
  echo "wrote .sqlx/ ($(ls .sqlx | wc -l) queries); commit it"
fi
