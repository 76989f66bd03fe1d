# Run by the postgres image once, when it initialises an empty data volume
# (installed into /docker-entrypoint-initdb.d/ by deploy/postgres/entrypoint.sh), as the
# postgres user, with the server listening on its socket only and the
# superuser (POSTGRES_USER) and the database (POSTGRES_DB, mcp_connect)
# already made. It creates the role the service connects as, mcp_connect:
# it may log in and owns the database, nothing more. As the database's
# owner it owns the `public` schema too (Postgres 15 and later give that
# schema to pg_database_owner), so the service's migrations create their
# tables there and own them.
#
# The password comes from deploy/postgres/entrypoint.sh, which read
# secrets/service_db_password as root into MCP_CONNECT_DB_PASSWORD; psql
# takes it from the environment (\getenv, psql 15 or later) and quotes it
# (:'var'), so it is neither on a command line nor pasted into SQL.
#
# This file is not executable, so the image's entrypoint sources it rather
# than running it: the `unset` at the end then takes the password out of
# the environment the server inherits. (Were the file executable, the
# server started this time would keep the variable until its next restart:
# readable only by root and the postgres user inside the container, who
# hold the superuser anyway, so harmless, but there is no need for it.)
: "${MCP_CONNECT_DB_PASSWORD:?is not set: start the postgres service through deploy/postgres/entrypoint.sh (docker-compose.yml does)}"
psql -X -q -v ON_ERROR_STOP=1 --no-password --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v db="$POSTGRES_DB" <<'SQL'
-- The statement carrying the password is never written to the server's
-- log, not even when it fails.
SET log_statement = 'none';
SET log_min_error_statement = 'panic';
\getenv service_password MCP_CONNECT_DB_PASSWORD
CREATE ROLE mcp_connect LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'service_password';
\unset service_password
ALTER DATABASE :"db" OWNER TO mcp_connect;
SQL
unset MCP_CONNECT_DB_PASSWORD
echo "service-role.sh: created role mcp_connect, owner of database $POSTGRES_DB"
