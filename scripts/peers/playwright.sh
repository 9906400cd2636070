#!/usr/bin/env bash
# playwright-core from npm (the browser driver only; the browser is scripts/peers/chromium.sh).
# Usage: scripts/peers/playwright.sh DEST  (DEST/node_modules/playwright-core)
set -euo pipefail
dest=${1:?usage: playwright.sh DEST}
VERSION=1.65.1
command -v node >/dev/null || { echo "node is not installed" >&2; exit 77; }
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 77; }
mkdir -p "$dest"
cd "$dest"
[ -f package.json ] || echo '{"name":"bdk-peer-playwright","private":true}' > package.json
npm install --no-audit --no-fund --loglevel=error "playwright-core@$VERSION"
node -e "require('playwright-core'); console.log('playwright-core', require('playwright-core/package.json').version)"
touch .ready
