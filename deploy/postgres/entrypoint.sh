#!/bin/sh
# The postgres service's entrypoint (docker-compose.yml), in front of the
# image's own. It runs as root, like the image's entrypoint before that
# drops to the postgres user: only root reads the secrets, which are bind
# mounts with the host file's owner (uid 10001) and mode 0600. On the first
# start, when the image will initialise an empty data volume, it reads the
# password of the service's role (mcp_connect) into the environment, where
# deploy/postgres/service-role.sh, run by the image as the postgres user,
# takes it from, and then removes it again. Later starts skip this: the
# role exists already. The variable is never part of the container's
# configuration, so `docker inspect` does not show it.
set -eu
if [ ! -s "${PGDATA:-/var/lib/postgresql/data}/PG_VERSION" ]; then
  MCP_CONNECT_DB_PASSWORD=$(cat "${MCP_CONNECT_DB_PASSWORD_FILE:?names the service role password file}")
  export MCP_CONNECT_DB_PASSWORD
  # The postgres user runs it: copied in readable by all (the checkout's
  # copy may be 0600), not executable, so the image sources it.
  cp /usr/local/share/mcp-connect/service-role.sh /docker-entrypoint-initdb.d/10-mcp-connect-role.sh
  chmod 0644 /docker-entrypoint-initdb.d/10-mcp-connect-role.sh
fi
exec docker-entrypoint.sh "$@"
