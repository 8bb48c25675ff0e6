#!/usr/bin/env bash
# Installs what koord needs beyond the Rust toolchain, from Debian's packages, when missing:
#   protobuf-compiler  protoc, which the k8s-cri crate (CRI gRPC bindings) runs at build time
#   containerd, runc   a real CRI runtime for the tests that evict through CRI
#   busybox-static, umoci   a registry-less image for those tests (spec/cri-testing.md)
#   chromium           (optional) headless browser the `koord simulate` report test renders
#                      its HTML in; the test skips that check without it
# Idempotent and quick when everything is there. Uses sudo when not root.
set -euo pipefail

need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v umoci >/dev/null || need+=(umoci)
optional=()
command -v chromium >/dev/null || optional+=(chromium)
[ ${#need[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null || true
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/deps.sh: installing ${need[*]}" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ${#optional[@]} -gt 0 ]; then
  echo "scripts/deps.sh: installing ${optional[*]} (optional)" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null ||
    echo "scripts/deps.sh: ${optional[*]} not installed; the tests that use it skip" >&2
fi
