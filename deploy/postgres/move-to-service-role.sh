# Moves a data volume made before the service had a role of its own (then
# the image's superuser was mcp_connect, and the service connected as it)
# to what docker-compose.yml makes on a new volume: the superuser is
# `postgres`, with the password in secrets/postgres_password, and the
# service's mcp_connect is a plain role with the password in
# secrets/service_db_password, owning the database and everything in it.
# README.md ("Deploying with Docker Compose") says when to run it:
#
#   docker compose exec -T postgres sh -s < deploy/postgres/move-to-service-role.sh
#
# It runs as root in the postgres container (which reads the secrets) and
# connects over the server's socket, which trusts local users. The old
# mcp_connect cannot simply lose SUPERUSER: initdb made it, and Postgres
# (16 and later) keeps that bootstrap role a superuser. So a temporary
# superuser renames it to `postgres` (no session may rename its own role),
# a new mcp_connect is made and given the database and every object in it
# the old role owned (tables with their indexes and sequences, standalone
# sequences, views, types, routines, schemas), all in one transaction: if
# anything fails, nothing has changed. The temporary role is dropped at
# the end, whatever happened. Run it with the service stopped; on a volume
# already moved it changes nothing.
set -eu
db=mcp_connect
tmp=mcp_connect_move
q() { psql -X -q -tA -v ON_ERROR_STOP=1 -d "$db" "$@"; }

if q -U postgres -c 'SELECT 1' >/dev/null 2>&1 \
  && [ "$(q -U postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mcp_connect'")" = f ]; then
  echo "move-to-service-role: already done (postgres is the superuser, mcp_connect is not)"
  exit 0
fi
if [ "$(q -U mcp_connect -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mcp_connect'")" != t ]; then
  echo "move-to-service-role: mcp_connect is not the superuser here; nothing this script knows how to move" >&2
  exit 1
fi
for f in postgres_password service_db_password; do
  if [ ! -s "/run/secrets/$f" ]; then
    echo "move-to-service-role: /run/secrets/$f is missing: run deploy/make-secrets.sh, then recreate this container with the current docker-compose.yml (docker compose up -d postgres)" >&2
    exit 1
  fi
done
cleanup() {
  q -U postgres -c "DROP ROLE IF EXISTS $tmp" 2>/dev/null || q -U mcp_connect -c "DROP ROLE IF EXISTS $tmp"
}
q -U mcp_connect -c "DROP ROLE IF EXISTS $tmp" -c "CREATE ROLE $tmp SUPERUSER LOGIN"
trap cleanup EXIT

q -U "$tmp" <<'SQL'
-- The statements carrying passwords are never written to the server's log,
-- not even when one fails.
SET log_statement = 'none';
SET log_min_error_statement = 'panic';
\set pg_password `cat /run/secrets/postgres_password`
\set service_password `cat /run/secrets/service_db_password`
-- No session may be left as mcp_connect (this script's own end within a
-- few seconds): the service's would go on as the superuser.
DO $$
BEGIN
  FOR i IN 1..50 LOOP
    PERFORM pg_stat_clear_snapshot();
    IF NOT EXISTS (SELECT FROM pg_stat_activity
                    WHERE usename = 'mcp_connect' AND backend_type = 'client backend') THEN
      RETURN;
    END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RAISE EXCEPTION 'sessions of mcp_connect are open: stop the service first (docker compose stop mcp-connect)';
END
$$;
BEGIN;
ALTER ROLE mcp_connect RENAME TO postgres;
ALTER ROLE postgres PASSWORD :'pg_password';
CREATE ROLE mcp_connect LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'service_password';
\unset pg_password
\unset service_password
ALTER DATABASE mcp_connect OWNER TO mcp_connect;
-- Schemas (`public` belongs to pg_database_owner since Postgres 15, so it
-- follows the database), then relations: a table takes its indexes and
-- the sequences of its serial and identity columns along.
SELECT format('ALTER SCHEMA %I OWNER TO mcp_connect', nspname)
  FROM pg_namespace
 WHERE nspowner = 'postgres'::regrole AND nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%'
\gexec
SELECT format('ALTER TABLE %s OWNER TO mcp_connect', c.oid::regclass)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relowner = 'postgres'::regrole
   AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
   AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
   AND NOT EXISTS (SELECT FROM pg_depend d
                    WHERE c.relkind = 'S' AND d.classid = 'pg_class'::regclass AND d.objid = c.oid
                      AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
\gexec
SELECT format('ALTER %s %s OWNER TO mcp_connect', CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, t.oid::regtype)
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typowner = 'postgres'::regrole
   AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
   AND (t.typtype IN ('e', 'd', 'r')
        OR (t.typtype = 'c' AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'))
\gexec
SELECT format('ALTER %s %s OWNER TO mcp_connect', CASE p.prokind WHEN 'a' THEN 'AGGREGATE' ELSE 'ROUTINE' END, p.oid::regprocedure)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proowner = 'postgres'::regrole
   AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
\gexec
-- Nothing of the old superuser's may stay behind in the service's schemas
-- (an object of a kind moved by nothing above: then nothing is moved, and
-- the old URL still works). Nor may a session have slipped in as the old
-- role since the wait above: it would go on as the superuser.
DO $$
DECLARE
  left_behind bigint;
BEGIN
  SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
           WHERE t.typowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
             AND t.typtype <> 'b' AND NOT (t.typtype = 'c' AND t.typrelid <> 0
                  AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) <> 'c'))
       + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.proowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_namespace
           WHERE nspowner = 10 AND nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace
           WHERE c.collowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
           WHERE o.oprowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_statistic_ext s JOIN pg_namespace n ON n.oid = s.stxnamespace
           WHERE s.stxowner = 10 AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%')
       + (SELECT count(*) FROM pg_largeobject_metadata WHERE lomowner = 10)
    INTO left_behind;
  IF left_behind > 0 THEN
    RAISE EXCEPTION '% object(s) of a kind this script does not move are owned by the old superuser: nothing was changed', left_behind;
  END IF;
  PERFORM pg_stat_clear_snapshot();
  IF EXISTS (SELECT FROM pg_stat_activity
              WHERE usesysid = 10 AND backend_type = 'client backend' AND pid <> pg_backend_pid()) THEN
    RAISE EXCEPTION 'a session of the old role opened meanwhile: nothing was changed; stop it and run this again';
  END IF;
END
$$;
COMMIT;
SQL
q -U postgres -c "SELECT 'move-to-service-role: done; mcp_connect owns ' || count(*) || ' tables, superuser: ' || (SELECT rolsuper FROM pg_roles WHERE rolname = 'mcp_connect') FROM pg_tables WHERE tableowner = 'mcp_connect'"
