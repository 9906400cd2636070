#!/usr/bin/env bash
# Installs the official Python MCP SDK (`mcp` from PyPI, pinned) in a virtual environment in DEST:
# tests run DEST/bin/python with the client scripts in crates/bdk-server/tests/peers/.
# Exit 77 when python3 (with venv) is absent (the tests skip loudly).
set -euo pipefail
DEST=${1:?usage: mcp-python.sh DEST}
VERSION=1.26.0
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 is needed for the Python MCP SDK" >&2
  exit 77
fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "python3 has no venv/ensurepip module" >&2
  exit 77
fi
python3 -m venv "$DEST"
"$DEST/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$VERSION"
"$DEST/bin/python" -c 'import mcp.client.streamable_http'
