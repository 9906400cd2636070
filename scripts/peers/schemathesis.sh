#!/usr/bin/env bash
# schemathesis from PyPI in a virtual environment (DEST/venv/bin/schemathesis).
# Usage: scripts/peers/schemathesis.sh DEST
set -euo pipefail
dest=${1:?usage: schemathesis.sh DEST}
VERSION=4.32.5
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "python3 is not installed" >&2; exit 77; }
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' || { echo "schemathesis needs python >= 3.9" >&2; exit 77; }
"$py" -m venv "$dest/venv" || { echo "python3 has no venv module" >&2; exit 77; }
"$dest/venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
"$dest/venv/bin/schemathesis" --version
touch "$dest/.ready"
