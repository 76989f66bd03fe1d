# Build stage: the release binary.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends cmake clang pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
# A workspace member: cargo needs its manifest even to build the service.
COPY bench ./bench
RUN cargo build --release --locked --bin mcp-connect

# Runtime stage: a slim image, a non-root user, only the binary.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home mcp
COPY --from=build /src/target/release/mcp-connect /usr/local/bin/mcp-connect
USER 10001
ENV MCP_CONNECT_BIND=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["mcp-connect"]
CMD ["serve"]
