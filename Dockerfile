# One image for every role: `koord --role=...`.
FROM rust:1.95-bookworm AS build
WORKDIR /src
# protoc: the k8s-cri crate generates the CRI gRPC bindings at build time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY config ./config
COPY manifests ./manifests
RUN cargo build --release --locked --bin koord \
    && strip target/release/koord

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/koord /usr/local/bin/koord
COPY config/koord.yaml /etc/koord/koord.yaml
ENTRYPOINT ["/usr/local/bin/koord"]
