#!/usr/bin/env bash
# Creates the secrets docker-compose.yml reads, under ./secrets/, without
# starting anything: the password of the Postgres superuser (`postgres`,
# for the operator), the password of the role the service connects as
# (`mcp_connect`, no superuser; both hex, so the database URL made from it
# needs no escaping), the database URL, the encryption key and the metrics
# token. Keeps every file that exists already, so it is safe to run
# again; it then gives every secret mode 0600, owned by the service's user
# (uid 10001 in the image), and lists the secrets only you can supply: the
# web client secret and each provider's client secret.
set -euo pipefail
cd "$(dirname "$0")/.."
uid=10001
umask 077
mkdir -p secrets/providers

new() { [ -s "secrets/$1" ] && return 1; echo "created secrets/$1" >&2; }
if new postgres_password; then openssl rand -hex 24 > secrets/postgres_password; fi
if new service_db_password; then openssl rand -hex 24 > secrets/service_db_password; fi
if new database_url; then
  printf 'postgres://mcp_connect:%s@postgres:5432/mcp_connect\n' "$(cat secrets/service_db_password)" > secrets/database_url
fi
# A secrets/ from before the service had a role of its own: its URL holds
# the superuser's password (mcp_connect was the superuser then). Kept as it
# is, it goes on working with the data volume made then, whose mcp_connect
# is still the superuser; it would not with a new volume.
old_layout=
if [ -r secrets/database_url ] && [ -r secrets/postgres_password ] \
  && [[ "$(<secrets/database_url)" == *":$(<secrets/postgres_password)@"* ]]; then
  old_layout=1
fi
# Same format as `mcp-connect keys generate`: <key id>:<32 random bytes, base64>,
# the id k<date>-<six random hex digits>, so that a key generated for a
# rotation on the same day gets another id (the ring refuses one twice).
if new keys; then
  printf 'k%s-%s:%s\n' "$(date -u +%Y%m%d)" "$(openssl rand -hex 3)" "$(openssl rand -base64 32)" > secrets/keys
fi
if new metrics_token; then openssl rand -hex 32 > secrets/metrics_token; fi

missing=()
[ -s secrets/web_client_secret ] || missing+=("secrets/web_client_secret   (the web client's secret at your identity provider)")
while IFS= read -r line; do
  case "$line" in
    MCP_CONNECT_PROVIDERS__*__CLIENT_SECRET_FILE=/run/secrets/providers/*)
      name=${line##*/}
      [ -s "secrets/providers/$name" ] || missing+=("secrets/providers/$name   (the client secret of provider $name)")
      ;;
  esac
done < deploy/providers.env

chmod 700 secrets secrets/providers
find secrets -type f -exec chmod 600 {} +
if [ "$(id -u)" = 0 ]; then
  chown -R "$uid" secrets
  # Postgres reads its password as root before it drops privileges.
else
  echo "note: not root, so secrets/ stays owned by you; the service (uid $uid) must be able to read it:" >&2
  echo "      sudo chown -R $uid secrets" >&2
fi
if [ -n "$old_layout" ]; then
  echo "warning: secrets/database_url uses the Postgres superuser's password: this deployment predates" >&2
  echo "         the service's own role and still runs it as the superuser; README.md, \"Deploying with" >&2
  echo "         Docker Compose\", says how to move it (secrets/service_db_password is the new role's password)" >&2
fi
if [ ${#missing[@]} -gt 0 ]; then
  printf 'still missing (write each with printf %%s '"'"'…'"'"' > FILE, then run this again):\n' >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi
echo "secrets ready" >&2
