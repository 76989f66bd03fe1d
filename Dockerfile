# The base images are build arguments so that a machine that cannot pull
# them can pass local ones (scripts/docker-setup.sh); the defaults are the
# official images.
ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# Build stage: the release binary.
FROM ${RUST_IMAGE} AS build
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends cmake pkg-config \
    && rm -rf /var/lib/apt/lists/*
# Dependencies first, in a layer of their own: built against empty targets,
# so a change to the sources reuses this layer instead of recompiling every
# dependency. The workspace's other members only need to parse.
COPY Cargo.toml Cargo.lock ./
COPY bench/Cargo.toml ./bench/
COPY provider-fakes/Cargo.toml ./provider-fakes/
RUN mkdir -p src tests/e2e bench/src/bare provider-fakes/src \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs provider-fakes/src/lib.rs \
    && for f in tests/e2e/main.rs bench/src/main.rs bench/src/bare/main.rs; do echo 'fn main() {}' > "$f"; done \
    && cargo build --release --locked --bin mcp-connect \
    && rm -rf src target/release/.fingerprint/mcp-connect-* target/release/deps/mcp_connect-* \
        target/release/deps/libmcp_connect-* target/release/mcp-connect*
COPY src ./src
COPY migrations ./migrations
# The checked queries' data: the build has no database to ask.
COPY .sqlx ./.sqlx
COPY catalog ./catalog
COPY templates ./templates
COPY static ./static
RUN SQLX_OFFLINE=true cargo build --release --locked --bin mcp-connect

# Runtime stage: a slim image, a non-root user, only the binary.
FROM ${RUNTIME_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home mcp
COPY --from=build /src/target/release/mcp-connect /usr/local/bin/mcp-connect
USER 10001
# Listens on 0.0.0.0:8080, the default (no ENV here: it would override a
# `bind` in the settings file).
EXPOSE 8080
# Needs nothing outside the image: the binary asks its own /readyz, on the
# port `bind` sets (from the settings file or MCP_CONNECT_BIND). The check
# is a process of its own: it sees the file named by MCP_CONNECT_CONFIG_FILE,
# not a `--config` given to `serve` (name the file in the variable).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["mcp-connect", "health"]
ENTRYPOINT ["mcp-connect"]
CMD ["serve"]
