#!/usr/bin/env bash
# Install Azurite (the Azure Storage emulator, npm package `azurite`) into
# .venv-azurite/, for the az:// store tests (wanrl_s3.testing.clouds.local_azure
# finds .venv-azurite/node_modules/.bin/azurite-blob there).
#
# Needs Node.js and npm; on Debian without them: apt-get install nodejs npm.
# Azurite 3.35.0 is pinned: later releases declare Node >= 21/22, and Debian 12
# ships Node 18/20. Idempotent: a pinned install already in place is kept.
#
# Usage: scripts/install-azurite.sh
set -euo pipefail

AZURITE_VERSION="3.35.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${AZURITE_PREFIX:-$ROOT/.venv-azurite}"
BIN="$PREFIX/node_modules/.bin/azurite-blob"

if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "$AZURITE_VERSION" ]; then
    echo "azurite $AZURITE_VERSION already in $PREFIX"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    else
        echo "install-azurite: npm not found; install Node.js and npm (apt-get install nodejs npm)" >&2
        exit 1
    fi
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION"
echo "azurite $("$BIN" --version) installed in $PREFIX"
