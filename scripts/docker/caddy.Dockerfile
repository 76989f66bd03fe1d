# A Caddy image for machines that cannot pull `caddy:2`: Debian's package on
# the local base, with the official image's paths, command and volumes.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends caddy ca-certificates \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data /config /etc/caddy
ENV XDG_DATA_HOME=/data XDG_CONFIG_HOME=/config
WORKDIR /srv
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
