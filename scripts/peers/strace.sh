#!/usr/bin/env bash
# strace, for the test that checks from a syscall trace that every event a client sees was
# fdatasync'ed first. Installed from Debian's packages when missing.
set -euo pipefail
dest="$1"
if ! command -v strace >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "strace is not installed and this machine cannot apt-get it (not root, or no apt)"
        exit 77
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends strace \
        || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends strace; }
fi
# strace must be able to trace a child here (a container may forbid ptrace).
if ! strace -f -o /dev/null true 2>"$dest/probe.err"; then
    echo "strace cannot trace processes on this machine: $(cat "$dest/probe.err")"
    exit 77
fi
command -v strace > "$dest/path"
