#!/usr/bin/env bash
# Makes a Docker engine and the images the compose file needs available on a
# machine that cannot pull from an image registry (CI here):
#   - Debian's docker.io and docker-compose, and a running dockerd;
#   - mcp-connect-local/debian:bookworm, a minimal Debian made by debootstrap
#     from Debian's package mirror (the RUNTIME_IMAGE of the Dockerfile);
#   - mcp-connect-local/rust:bookworm, that base plus this machine's Rust
#     toolchain (the RUST_IMAGE of the Dockerfile);
#   - mcp-connect-local/caddy and mcp-connect-local/postgres, from Debian's
#     caddy and postgresql packages, standing in for caddy:2 and postgres:17.
# Idempotent: whatever exists already is kept. Prints the variables to
# export for docker compose (eval "$(bash scripts/docker-setup.sh)").
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '==> docker setup: %s\n' "$*" >&2; }
prefix=mcp-connect-local

if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null || ! command -v debootstrap >/dev/null; then
  log "installing docker.io, docker-compose, debootstrap"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  mkdir -p /var/lib/docker
  setsid dockerd --storage-driver overlay2 >/var/log/mcp-connect-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/mcp-connect-dockerd.log >&2; exit 1; }
fi

have() { docker image inspect "$1" >/dev/null 2>&1; }

base=$prefix/debian:bookworm
if ! have "$base"; then
  log "debootstrap bookworm -> $base"
  root=$(mktemp -d /var/tmp/mcp-connect-rootfs.XXXXXX)
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
  debootstrap --variant=minbase bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >/dev/null
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | docker import - "$base" >/dev/null
  rm -rf "$root"
fi

rust=$prefix/rust:bookworm
if ! have "$rust"; then
  toolchain=$(rustc --print sysroot)
  log "builder image $rust from $toolchain"
  ctx=$(mktemp -d)
  mkdir -p "$ctx/toolchain/lib"
  cp -a "$toolchain/bin" "$ctx/toolchain/"
  # Only what compiling for this machine needs: no docs, no sources.
  cp -a "$toolchain"/lib/*.so* "$ctx/toolchain/lib/" 2>/dev/null || true
  mkdir -p "$ctx/toolchain/lib/rustlib"
  cp -a "$toolchain/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')" "$toolchain/lib/rustlib/etc" "$ctx/toolchain/lib/rustlib/" 2>/dev/null || true
  mkdir -p "$ctx/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ctx/ca-certificates/" 2>/dev/null || true
  cp scripts/docker/rust.Dockerfile "$ctx/Dockerfile"
  docker build -q --build-arg BASE_IMAGE="$base" -t "$rust" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

# Tagged by the hash of what they are made of, so a change rebuilds them.
tag() { cat "scripts/docker/$1".* | sha256sum | cut -c1-12; }
for name in caddy postgres; do
  image=$prefix/$name:$(tag "$name")
  if ! have "$image"; then
    log "$image from Debian's package"
    docker build -q --build-arg BASE_IMAGE="$base" -t "$image" \
      -f "scripts/docker/$name.Dockerfile" scripts/docker >/dev/null
  fi
done

cat <<VARS
export RUST_IMAGE=$rust
export RUNTIME_IMAGE=$base
export CADDY_IMAGE=$prefix/caddy:$(tag caddy)
export POSTGRES_IMAGE=$prefix/postgres:$(tag postgres)
VARS
