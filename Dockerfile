# One image for every role: `koord --role=...`, or Koordinator's `/koord-scheduler`, ...
FROM rust:1.95-bookworm AS build
WORKDIR /src
# protoc: the k8s-cri crate generates the CRI gRPC bindings at build time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY link ./link
COPY vendor ./vendor
COPY src ./src
COPY benches ./benches
COPY config ./config
COPY manifests ./manifests
# Koordinator's Grafana dashboards: `koord docs` names the panels that query each metric.
COPY tests/fixtures/koordinator/dashboards ./tests/fixtures/koordinator/dashboards
RUN cargo build --release --locked --bin koord \
    && strip target/release/koord

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/koord /usr/local/bin/koord
COPY config/koord.yaml /etc/koord/koord.yaml
# Koordinator's entry points, where its chart's `command` runs them: koord run under one
# of these names is that component (src/kernel/entry.rs).
RUN for name in koord-scheduler koord-descheduler koord-manager koordlet \
        koord-runtime-proxy koord-device-daemon; do \
        ln -s /usr/local/bin/koord "/$name"; \
    done
ENTRYPOINT ["/usr/local/bin/koord"]
