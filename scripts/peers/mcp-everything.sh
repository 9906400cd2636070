#!/usr/bin/env bash
# Installs the reference MCP server (@modelcontextprotocol/server-everything, pinned) into DEST.
# It serves stdio (`node DEST/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio`)
# and streamable HTTP (`... streamableHttp`, port from $PORT).
# Exit 77 when node or npm is absent (the tests skip loudly).
set -euo pipefail
DEST=${1:?usage: mcp-everything.sh DEST}
VERSION=2026.1.26
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are needed for @modelcontextprotocol/server-everything" >&2
  exit 77
fi
mkdir -p "$DEST"
cd "$DEST"
[ -f package.json ] || echo '{"name":"bdk-peer-mcp-everything","private":true}' > package.json
npm install --no-audit --no-fund --loglevel=error "@modelcontextprotocol/server-everything@$VERSION"
ENTRY=$(node -e 'const p=require("./node_modules/@modelcontextprotocol/server-everything/package.json"); const b=typeof p.bin==="string"?p.bin:Object.values(p.bin)[0]; console.log(require("path").resolve("node_modules/@modelcontextprotocol/server-everything", b))')
[ -f "$ENTRY" ] || { echo "server-everything entry point $ENTRY is missing" >&2; exit 1; }
echo "$ENTRY" > entry
