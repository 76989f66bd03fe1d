#!/bin/sh
# Like the official image's entrypoint, as far as the compose file uses it:
# started as root, it reads POSTGRES_PASSWORD_FILE (a secret may be 0600 and
# owned by another user), creates the cluster on the first start with
# POSTGRES_USER owning POSTGRES_DB, then runs the server as `postgres` on all
# interfaces with password authentication.
set -eu
as_pg() { runuser -u postgres -- "$@"; }
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  cat "$POSTGRES_PASSWORD_FILE" > "$pwfile"
  chown postgres "$pwfile"
  as_pg initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  as_pg pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "${POSTGRES_DB:-$POSTGRES_USER}" != postgres ]; then
    as_pg createdb -U "$POSTGRES_USER" -O "$POSTGRES_USER" "${POSTGRES_DB:-$POSTGRES_USER}"
  fi
  as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
