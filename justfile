# Developer shortcuts; the README's commands do not need just.

default: test

build:
    scripts/deps.sh
    cargo build --release

test:
    scripts/deps.sh
    cargo test

lint:
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings

# Everything on this machine: embedded API server, local node runtime, every role.
run:
    cargo run --release -- --role=all --embedded

# Regenerate manifests/ (CRDs, RBAC, workloads, overlays, dashboards) from the code.
manifests:
    cargo run -- manifests --out-dir manifests

# Regenerate only manifests/base/crds from the Rust types.
crds:
    cargo run -- crds --out-dir manifests/base/crds

# Regenerate the book's references from the code and build the book (docs/) as HTML into
# target/book, installing mdbook when it is missing.
docs:
    cargo run -- docs --out-dir docs/reference
    command -v mdbook >/dev/null || cargo install mdbook --locked --version '^0.4'
    mdbook build

bench:
    cargo bench

ci:
    .ci/run
