#!/usr/bin/env bash
# Headless Chromium for the playground's browser tests: Debian's `chromium` package.
# Usage: scripts/peers/chromium.sh DEST  (writes DEST/chromium-path with the executable's path)
set -euo pipefail
dest=${1:?usage: chromium.sh DEST}
mkdir -p "$dest"
find_chromium() { command -v chromium || command -v chromium-browser || command -v google-chrome || true; }
bin=$(find_chromium)
if [ -z "$bin" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "chromium is not installed and there is no apt-get to install it" >&2
    exit 77
  fi
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=sudo; else
      echo "chromium is not installed and installing it needs root (apt-get install chromium)" >&2
      exit 77
    fi
  else
    sudo=
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || true
  if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; then
    echo "apt-get could not install chromium" >&2
    exit 77
  fi
  bin=$(find_chromium)
fi
[ -n "$bin" ] || { echo "chromium still not found after installing" >&2; exit 77; }
"$bin" --headless --no-sandbox --disable-gpu --version >/dev/null 2>&1 || "$bin" --version
echo "$bin" > "$dest/chromium-path"
echo "chromium: $bin ($("$bin" --version 2>/dev/null || echo unknown version))"
touch "$dest/.ready"
