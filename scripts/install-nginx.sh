#!/usr/bin/env bash
# Install nginx from Debian's packages (nginx-light: the proxy cache and the
# slice module, nothing else needed), for the caching CDN edge that
# wanrl_s3.testing.local_cdn_edge starts in tests and benchmarks.
#
# Only the binary is used: local_cdn_edge runs nginx with its own config, on
# free ports, in a temporary folder. Where installing starts the packaged
# service (Debian with systemd), that service is left alone: it listens on
# port 80 and does not meet the edge. Idempotent: an nginx already on the
# machine is kept.
#
# Usage: scripts/install-nginx.sh
set -euo pipefail

have_nginx() {
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]
}

if have_nginx; then
    echo "nginx already installed: $( (command -v nginx || echo /usr/sbin/nginx) | head -1)"
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
else
    echo "install-nginx: nginx not found; install it as root: apt-get install nginx-light" >&2
    exit 1
fi
have_nginx || { echo "install-nginx: nginx-light installed but no nginx binary found" >&2; exit 1; }
echo "nginx installed: $(/usr/sbin/nginx -v 2>&1)"
