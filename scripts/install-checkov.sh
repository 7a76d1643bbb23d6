#!/usr/bin/env bash
# Create .venv-checkov with a pinned checkov, apart from the project's .venv.
#
# Why a separate venv: checkov pins many of its dependencies exactly (boto3,
# botocore, networkx, jsonschema, ...), and those pins would fight the
# project's own boto3/moto versions. tests/terraform/test_terraform_checkov.py runs
# .venv-checkov/bin/checkov when it exists and skips (saying why) when it does not.
#
# Usage: scripts/install-checkov.sh
#        PYTHON=python3.12 scripts/install-checkov.sh   (another interpreter)
# Idempotent: a venv that already holds the pinned version is kept as it is.
set -euo pipefail

CHECKOV_VERSION="3.3.30"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CHECKOV_VENV:-$ROOT/.venv-checkov}"
PYTHON="${PYTHON:-python3}"

if [ -x "$VENV/bin/checkov" ] && [ "$("$VENV/bin/checkov" --version 2>/dev/null)" = "$CHECKOV_VERSION" ]; then
    echo "checkov $CHECKOV_VERSION already in $VENV"
    exit 0
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"
echo "checkov $("$VENV/bin/checkov" --version) installed in $VENV"
