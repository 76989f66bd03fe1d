#!/usr/bin/env bash
# The compose smoke test: the operator's docker compose stack (Postgres,
# mcp-connect, Caddy with TLS) set up as README.md says, with the
# end-to-end suite's oidc-provider peers as the identity provider and the
# third-party provider, its MCP Python SDK client and headless Chromium.
# The suite's `compose_stack` scenario connects through Caddy, restarts the
# stack (the connection survives) and scales it to two instances (a new
# connection completes across them).
#
#   bash scripts/compose-smoke.sh          the whole test (CI)
#
# The suite calls this script back (E2E_COMPOSE) with one action:
#   up | logs | restart | scale | down
# Everything listens on 127.0.0.1 or on the Docker bridge this run started;
# nothing is sent anywhere else.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${E2E_COMPOSE_DIR:-$repo/target/compose-smoke}
stack=$dir/stack
# One project per checkout, so two checkouts on one machine do not share a stack.
project=mcpconnectsmoke$(printf %s "$repo" | sha256sum | cut -c1-8)
log() { printf '==> compose smoke: %s\n' "$*" >&2; }
dc() { (cd "$stack" && docker-compose -p "$project" -f docker-compose.yml -f docker-compose.smoke.yml "$@"); }

# Until every instance of mcp-connect reports healthy (its own healthcheck,
# `mcp-connect health`), or fail with the logs.
wait_healthy() {
  local want=$1
  for _ in $(seq 1 120); do
    local ids healthy=0
    ids=$(dc ps -q mcp-connect)
    for id in $ids; do
      [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] && healthy=$((healthy + 1))
    done
    [ "$healthy" -ge "$want" ] && { log "$healthy instance(s) healthy"; return 0; }
    sleep 1
  done
  dc ps >&2; dc logs --tail 40 >&2
  return 1
}

# The service connects as a role that is no superuser and owns its tables;
# the superuser is `postgres`; no secret of the database shows in `docker
# inspect` or in the logs. Run once the service is healthy (migrated).
check_roles() {
  local url_role roles tables
  url_role=$(sed -nE 's|^postgres://([^:@/]+):.*|\1|p' "$stack/secrets/database_url")
  # Every role connected over TCP: the service's instances (the LISTEN
  # connection each keeps). This check's psql uses the socket.
  roles=$(dc exec -T postgres psql -X -U postgres -d mcp_connect -tA -F ' ' -c \
    "SELECT DISTINCT a.usename, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls
       FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid
      WHERE a.client_addr IS NOT NULL AND a.datname = 'mcp_connect'")
  tables=$(dc exec -T postgres psql -X -U postgres -d mcp_connect -tA -F ' ' -c \
    "SELECT count(*), count(*) FILTER (WHERE tableowner = 'mcp_connect'),
            (SELECT rolsuper FROM pg_roles WHERE rolname = 'postgres')
       FROM pg_tables WHERE schemaname = 'public'")
  log "service database URL's role: $url_role; connected over TCP (role super createrole createdb bypassrls): ${roles:-none}"
  log "tables in public, owned by mcp_connect, postgres is superuser: $tables"
  if [ "$url_role" != mcp_connect ] || [ "$roles" != "mcp_connect f f f f" ]; then
    log "the service does not connect as mcp_connect without privileges"
    return 1
  fi
  read -r total owned pg_super <<<"$tables"
  if [ "$total" -lt 1 ] || [ "$owned" != "$total" ] || [ "$pg_super" != t ]; then
    log "the service's tables are not all owned by mcp_connect, or postgres is no superuser"
    return 1
  fi
  # Everything first, then one search: a `grep -q` in a pipe would stop
  # reading at a match, and under pipefail the writer's broken pipe would
  # turn the match into a pass. The passwords go to grep in a file, not on
  # its command line.
  local seen=$dir/inspect-and-logs
  # shellcheck disable=SC2046
  docker inspect $(dc ps -q) > "$seen"
  dc logs --no-color >> "$seen" 2>&1
  (umask 077 && cat "$stack/secrets/service_db_password" "$stack/secrets/postgres_password" > "$dir/passwords")
  if grep -qF -f "$dir/passwords" "$seen"; then
    log "a database password shows in docker inspect or in the logs"
    return 1
  fi
  rm -f "$seen" "$dir/passwords"
}

case "${1:-run}" in
run)
  start=$(date +%s)
  # Assigned first: a failing setup then stops here (set -e), where inside
  # `eval "$(…)"` its status would be lost.
  setup=$(bash "$repo/scripts/docker-setup.sh")
  eval "$setup"
  log "image build"
  # COMPOSE_SMOKE_NO_BUILD=1: use the mcp-connect:latest there is (local
  # iterations on the test itself).
  [ -n "${COMPOSE_SMOKE_NO_BUILD:-}" ] || docker build -q --build-arg RUST_IMAGE="$RUST_IMAGE" --build-arg RUNTIME_IMAGE="$RUNTIME_IMAGE" \
    -t mcp-connect:latest "$repo" >/dev/null
  log "image built after $(( $(date +%s) - start ))s"
  rm -rf "$dir"; mkdir -p "$dir"
  # The port Caddy publishes on 127.0.0.1, the peers' address on the Docker
  # bridge (Caddy's container reaches the host there), the test database's.
  # Docker binds the published ones only when the stack comes up, so they
  # are chosen below the kernel's ephemeral range, where no outgoing
  # connection takes its local port in the meantime (as the peers' are, in
  # provider-fakes/src/ports.rs).
  read -r port pgport < <(python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
chosen = []
while len(chosen) < 2:
    # A kernel whose ephemeral range starts this low leaves nothing safer
    # than its own choice.
    port = random.randrange(10000, low) if low > 10100 else 0
    try:
        with socket.create_server(("127.0.0.1", port)) as s:
            port = s.getsockname()[1]
    except OSError:
        continue
    if port not in chosen:
        chosen.append(port)
print(*chosen)
PY
)
  bridge=$(ip -4 -o addr show docker0 | awk '{print $4}' | cut -d/ -f1)
  printf 'export CADDY_IMAGE=%s POSTGRES_IMAGE=%s SMOKE_PORT=%s SMOKE_PGPORT=%s\n' \
    "$CADDY_IMAGE" "$POSTGRES_IMAGE" "$port" "$pgport" > "$dir/env"
  status=0
  E2E_COMPOSE="$repo/scripts/compose-smoke.sh" E2E_COMPOSE_DIR="$dir" \
    E2E_HTTPS_PORT=$port E2E_PUBLISHED_PORTS="$port $pgport" E2E_PEER_BIND=$bridge E2E_DATABASE_URL_FILE="$dir/database-url" \
    E2E_TRUSTED_SPKI_FILE="$dir/caddy-ca.spki" E2E_CA_FILE="$dir/stack/caddy-ca/root.crt" E2E_CA_BUNDLE="$dir/ca-bundle.crt" \
    E2E_OUT="$repo/target/e2e-compose" bash "$repo/e2e/run.sh" compose_stack || status=$?
  if [ "$status" = 0 ]; then
    # Both instances served the flow after scaling (health probes aside).
    # The log holds the containers there were at the end (the ones started
    # by the restart and the scale), each line prefixed with its
    # container's name; their numbers are compose's business (a container
    # still being removed when the stack came up again shifts them), so
    # count the instances that served, not particular numbers.
    served=$(grep -E 'mcp request|(GET|POST) /(connect|auth/|oauth/)' "$dir/final.log" \
      | sed -nE 's/^(mcp-connect[-_][0-9]+) .*/\1/p' | sort | uniq -c)
    log "requests of the flow per instance: $(echo "$served" | awk '{printf "%s=%s ", $2, $1}')"
    # Behind Caddy, audit rows name the client Caddy reports (here the
    # host, through the network's gateway), never Caddy itself.
    log "audited client addresses: $(paste -sd' ' "$dir/audit-ips.txt"); Caddy's: $(grep . "$dir/caddy-ips.txt" | paste -sd' ')"
    # Addresses only: an error of the query (kept apart) must not pass for one.
    if ! grep -q . "$dir/audit-ips.txt" \
      || grep -qvE '^[0-9a-fA-F.:]+$' "$dir/audit-ips.txt" \
      || grep -qxFf <(grep . "$dir/caddy-ips.txt") "$dir/audit-ips.txt"; then
      log "audit rows name Caddy (or nothing), not the client"
      status=1
    fi
    if [ "$(echo "$served" | grep -c .)" -lt 2 ]; then
      log "fewer than two instances served the flow after scaling"
      cat "$dir/final-ps.txt" >&2 2>/dev/null || true
      status=1
    fi
  fi
  log "$( [ "$status" = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start ))s"
  exit "$status"
  ;;
up)
  # shellcheck disable=SC1091
  . "$dir/env"
  export CADDY_IMAGE POSTGRES_IMAGE
  rm -rf "$stack"; mkdir -p "$stack"
  # The operator's steps (README.md, "Deploying with Docker Compose").
  cp "$repo/docker-compose.yml" "$repo/.env.example" "$stack/"
  cp -r "$repo/deploy" "$stack/"
  cd "$stack"
  # The stand-in for caddy:2 here (Debian's Caddy 2.6, see docker-setup.sh)
  # predates `request_buffers`; its `buffer_requests` reads each request
  # body whole before sending it on the same way (with no size cap).
  case "$(docker run --rm "$CADDY_IMAGE" caddy version)" in
  2.6.* | v2.6.*) sed -i -E 's/^(\s*)request_buffers .*/\1buffer_requests/' deploy/Caddyfile ;;
  esac
  cp .env.example .env
  sed -i -e "s/^MCP_CONNECT_SITE=.*/MCP_CONNECT_SITE=localhost:$SMOKE_PORT/" \
    -e "s/^MCP_CONNECT_HTTPS_PORT=.*/MCP_CONNECT_HTTPS_PORT=$SMOKE_PORT/" \
    -e "s/^MCP_CONNECT_TLS=.*/MCP_CONNECT_TLS=internal/" .env
  p=$E2E_PROVIDER
  cat > deploy/mcp-connect.toml <<TOML
public_url = "$E2E_PUBLIC_URL"
bind = "0.0.0.0:8080"
log_format = "json"
$(grep '^trusted_proxies' "$repo/deploy/mcp-connect.example.toml")

[auth]
issuer = "$E2E_AS_ISSUER"
web_client_id = "$E2E_WEB_CLIENT_ID"
scopes_supported = ["mcp:tools"]

[providers.$p]
display_name = "$E2E_PROVIDER_DISPLAY"
client_id = "$E2E_TP_CLIENT_ID"
authorize_url = "$E2E_TP_ISSUER/auth"
token_url = "$E2E_TP_ISSUER/token"
userinfo_url = "$E2E_TP_ISSUER/me"
revocation_url = "$E2E_TP_ISSUER/token/revocation"
issuer = "$E2E_TP_ISSUER"
api_base_url = "$E2E_API_BASE"
token_auth_method = "client_secret_post"
scopes = ["openid", "profile"]
TOML
  echo "MCP_CONNECT_PROVIDERS__${p^^}__CLIENT_SECRET_FILE=/run/secrets/providers/$p" > deploy/providers.env
  bash deploy/make-secrets.sh 2>/dev/null || true
  (umask 077; printf %s "$E2E_WEB_CLIENT_SECRET" > secrets/web_client_secret
   printf %s "$E2E_TP_CLIENT_SECRET" > "secrets/providers/$p")
  bash deploy/make-secrets.sh
  # Test-only: the peers behind the same Caddy, under Caddy's own CA.
  cat > deploy/caddy.d/peers.caddy <<CADDY
idp.localhost:$SMOKE_PORT {
	tls internal
	reverse_proxy $E2E_AS_UPSTREAM
}
provider.localhost:$SMOKE_PORT {
	tls internal
	reverse_proxy $E2E_TP_UPSTREAM
}
api.localhost:$SMOKE_PORT {
	tls internal
	reverse_proxy $E2E_API_UPSTREAM
}
CADDY
  # Test-only: the peers' names resolve to Caddy inside the network; the
  # service trusts Caddy's CA; the database is reachable for the checks.
  cat > docker-compose.smoke.yml <<YAML
services:
  caddy:
    networks:
      default:
        aliases: [idp.localhost, provider.localhost, api.localhost]
  mcp-connect:
    environment:
      SSL_CERT_FILE: /run/caddy-ca/root.crt
    volumes:
      - ./caddy-ca:/run/caddy-ca:ro
  postgres:
    ports:
      - "127.0.0.1:$SMOKE_PGPORT:5432"
YAML
  mkdir -p caddy-ca
  # Caddy first, alone: it makes its CA, which the service and the test's
  # clients are told to trust.
  dc up -d --no-deps caddy >&2
  cid=$(dc ps -q caddy)
  for _ in $(seq 1 60); do
    docker cp "$cid:/data/caddy/pki/authorities/local/root.crt" caddy-ca/root.crt 2>/dev/null && break
    sleep 1
  done
  docker cp "$cid:/data/caddy/pki/authorities/local/intermediate.crt" caddy-ca/intermediate.crt
  chmod 644 caddy-ca/*.crt
  cat /etc/ssl/certs/ca-certificates.crt caddy-ca/root.crt > "$dir/ca-bundle.crt"
  for cert in caddy-ca/root.crt caddy-ca/intermediate.crt; do
    openssl x509 -in "$cert" -pubkey -noout | openssl pkey -pubin -outform der \
      | openssl dgst -sha256 -binary | base64
  done | paste -sd, > "$dir/caddy-ca.spki"
  # The service's own URL (the role it connects as), published on loopback.
  sed "s|@postgres:5432/|@127.0.0.1:$SMOKE_PGPORT/|" secrets/database_url > "$dir/database-url"
  dc up -d >&2
  wait_healthy 1
  check_roles
  ;;
logs)
  exec docker-compose -p "$project" -f "$stack/docker-compose.yml" -f "$stack/docker-compose.smoke.yml" \
    --project-directory "$stack" logs -f --no-color mcp-connect
  ;;
restart)
  . "$dir/env"; export CADDY_IMAGE POSTGRES_IMAGE
  dc down >&2
  # Until the old containers are really gone (a freshly started dockerd
  # can lag), so the new ones start from a clean slate.
  for _ in $(seq 1 30); do
    [ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$project")" ] && break
    sleep 1
  done
  dc up -d >&2
  wait_healthy 1
  ;;
scale)
  . "$dir/env"; export CADDY_IMAGE POSTGRES_IMAGE
  dc up -d --scale mcp-connect=2 >&2
  wait_healthy 2
  # Caddy looks the instances up again every 5 s.
  sleep 6
  # /metrics is not served through Caddy, not even with its token; nor are
  # the health checks.
  for path in /metrics /healthz /readyz; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$stack/caddy-ca/root.crt" \
      -H "Authorization: Bearer $(cat "$stack/secrets/metrics_token")" \
      "https://localhost:$SMOKE_PORT$path")
    if [ "$code" != 404 ]; then
      log "$path through Caddy answered $code, not 404"
      exit 1
    fi
  done
  ;;
down)
  . "$dir/env"; export CADDY_IMAGE POSTGRES_IMAGE
  dc logs --no-color mcp-connect > "$dir/final.log" 2>&1 || true
  # Which client addresses the audit rows recorded, and Caddy's own.
  psql -X "$(cat "$dir/database-url")" -Atc \
    "SELECT DISTINCT ip FROM audit_events WHERE ip IS NOT NULL" > "$dir/audit-ips.txt" 2> "$dir/audit-ips.err" || true
  docker inspect -f '{{range .NetworkSettings.Networks}}{{println .IPAddress}}{{end}}' \
    $(dc ps -q caddy) > "$dir/caddy-ips.txt" 2>&1 || true
  dc ps -a > "$dir/final-ps.txt" 2>&1 || true
  dc down -v >&2
  ;;
*)
  echo "usage: $0 [run|up|logs|restart|scale|down]" >&2; exit 2
  ;;
esac
