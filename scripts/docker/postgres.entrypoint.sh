#!/bin/sh
# Like the official image's entrypoint, as far as the compose file uses it:
# given the command `postgres`, started as root, it reads
# POSTGRES_PASSWORD_FILE (a secret may be 0600 and owned by another user)
# into the environment and runs itself again as `postgres`, which keeps
# that environment. On the first start it then creates the cluster with the
# superuser POSTGRES_USER (default postgres), makes POSTGRES_DB, and runs
# /docker-entrypoint-initdb.d/* against a server listening on its socket
# only (*.sh sourced, or run when executable; *.sql through psql), as the
# postgres user; finally it runs the server on all interfaces with password
# authentication. Any other command runs as it is.
set -eu
self=/usr/local/bin/docker-entrypoint.sh
case "${1:-}" in
-*) set -- postgres "$@" ;;
postgres) ;;
*) exec "$@" ;;
esac
export POSTGRES_USER="${POSTGRES_USER:-postgres}"
export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
    export POSTGRES_PASSWORD
    unset POSTGRES_PASSWORD_FILE
  fi
  # As gosu does in the official image: the same process, no parent left
  # behind holding the environment it started with.
  HOME=/var/lib/postgresql exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$self" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?}" > "$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
    *.sh)
      echo "docker-entrypoint.sh: running $f"
      if [ -x "$f" ]; then "$f"; else . "$f"; fi
      ;;
    *.sql)
      echo "docker-entrypoint.sh: running $f"
      psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --dbname "$POSTGRES_DB" -f "$f"
      ;;
    *) if [ -e "$f" ]; then echo "docker-entrypoint.sh: ignoring $f"; fi ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
shift
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
