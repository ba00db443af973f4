#!/usr/bin/env bash
# Installs what `npm run build:all` needs on a Debian 12 machine (as root), from crates.io, PyPI and
# Debian only (napi's --use-napi-cross and GitHub downloads are not needed):
#   - the four rustup targets (rust-std for each),
#   - zig from PyPI (`ziglang`; cargo-zigbuild runs it as `python3 -m ziglang`) and cargo-zigbuild,
#     which link the gnu builds against glibc 2.17 and the musl builds against musl;
#   - readelf (binutils) for the checks;
#   - for the run checks (skip with --no-run-tools): qemu-user, Debian's musl, and an aarch64 root
#     at target/cross-sysroot/aarch64 holding Debian's arm64 nodejs (with its libraries) and musl,
#     extracted from the .debs (nothing of arm64 is installed on the host itself).
# Safe to re-run: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1
RUN_TOOLS=1
[ "${1:-}" = "--no-run-tools" ] && RUN_TOOLS=0

apt_updated=0
apt_install() {
  if [ $apt_updated = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

targets=$(node -p "require('./package.json').napi.targets.join(' ')")
installed=$(rustup target list --installed)
for t in $targets; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

command -v readelf >/dev/null || apt_install binutils

if ! command -v zig >/dev/null && ! python3 -m ziglang version >/dev/null 2>&1; then
  python3 -m pip install --quiet "ziglang==${ZIGLANG_VERSION}"
fi
command -v cargo-zigbuild >/dev/null || cargo install --locked --quiet cargo-zigbuild --version "${CARGO_ZIGBUILD_VERSION}"

if [ $RUN_TOOLS = 1 ]; then
  command -v qemu-aarch64 >/dev/null || apt_install qemu-user
  [ -e /lib/ld-musl-x86_64.so.1 ] || apt_install musl
  root=target/cross-sysroot/aarch64
  if [ ! -x "$root/usr/bin/node" ] || [ ! -e "$root/lib/ld-musl-aarch64.so.1" ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt_updated=0; }
    if [ $apt_updated = 0 ]; then apt-get update -qq; apt_updated=1; fi
    debs=$(mktemp -d)
    chmod 755 "$debs"
    # nodejs:arm64 and what it needs at run time (apt-cache depends nodejs:arm64 libnode108:arm64).
    (cd "$debs" && apt-get download -qq nodejs:arm64 libnode108:arm64 libc6:arm64 libgcc-s1:arm64 \
      libstdc++6:arm64 libbrotli1:arm64 libc-ares2:arm64 libicu72:arm64 libnghttp2-14:arm64 \
      libssl3:arm64 libuv1:arm64 zlib1g:arm64 node-acorn node-cjs-module-lexer node-undici \
      node-busboy musl:arm64)
    mkdir -p "$root"
    for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$root"; done
    rm -rf "$debs"
  fi
  echo "aarch64 root: $root ($(qemu-aarch64 -L "$root" "$root/usr/bin/node" -p 'process.arch + " node " + process.version'))"
fi
echo "cross toolchain ready: targets $targets; zig $(zig version 2>/dev/null || python3 -m ziglang version); $(cargo-zigbuild --version)"
