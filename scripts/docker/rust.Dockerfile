# The Rust builder image for machines that cannot pull `rust:*`: the local
# Debian base plus the toolchain given in the build context (scripts/docker-setup.sh).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates gcc g++ libc6-dev make cmake pkg-config \
    && rm -rf /var/lib/apt/lists/*
# The certificate authorities this machine trusts beyond Debian's (an
# outbound TLS proxy, for one): cargo fetches crates through them.
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY toolchain /usr/local/rust
ENV PATH=/usr/local/rust/bin:$PATH CARGO_HOME=/usr/local/cargo
RUN rustc --version && cargo --version
