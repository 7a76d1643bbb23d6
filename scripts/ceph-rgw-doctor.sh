#!/usr/bin/env bash
# `wanrl-s3 doctor` against a single-node Ceph RGW from Debian's packages (docs/stores.md).
#
#   apt-get install radosgw ceph-mon ceph-osd      # Debian 12: Ceph 16.2 (Pacific)
#   scripts/ceph-rgw-doctor.sh                     # prints the doctor's table; exits with its code
#
# One monitor, one OSD on memstore (in memory: nothing touches a disk but the
# monitor's small database), cephx, and radosgw on 127.0.0.1, all in a temporary
# folder and stopped on exit. Needs root (the daemons' default user switching).
set -euo pipefail

MON_PORT=${MON_PORT:-26789}
RGW_PORT=${RGW_PORT:-26790}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
D="$(mktemp -d /tmp/wanrl-ceph-XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$D"
}
trap cleanup EXIT

FSID="$(cat /proc/sys/kernel/random/uuid)"
mkdir -p "$D/mon" "$D/osd" "$D/run" "$D/log"
cat > "$D/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_PORT]
public addr = 127.0.0.1
keyring = $D/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
run dir = $D/run
log file = $D/log/\$name.log
admin socket = $D/run/\$name.asok
osd objectstore = memstore
memstore device bytes = 1073741824
osd data = $D/osd
mon data = $D/mon
ms bind ipv6 = false
osd crush chooseleaf type = 0
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
EOF
CONF=(-c "$D/ceph.conf")
AS_ROOT=(--setuser root --setgroup root)

key() { ceph-authtool "$D/keyring" --gen-key -n "$@" > /dev/null; }
ceph-authtool --create-keyring "$D/keyring" > /dev/null
key mon. --cap mon 'allow *'
key client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *'
key osd.0 --cap mon 'allow profile osd' --cap osd 'allow *'
key client.rgw --cap mon 'allow rw' --cap osd 'allow rwx'
monmaptool --create --addv a "[v2:127.0.0.1:$MON_PORT]" --fsid "$FSID" "$D/monmap" > /dev/null

ceph-mon "${CONF[@]}" --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring"
ceph-mon "${CONF[@]}" -i a -f "${AS_ROOT[@]}" & PIDS+=($!)
timeout 60 ceph "${CONF[@]}" osd create > /dev/null
ceph-osd "${CONF[@]}" -i 0 --mkfs "${AS_ROOT[@]}" 2> /dev/null
ceph-osd "${CONF[@]}" -i 0 -f "${AS_ROOT[@]}" 2> /dev/null & PIDS+=($!)
radosgw "${CONF[@]}" -n client.rgw -f "${AS_ROOT[@]}" > "$D/log/rgw.out" 2>&1 & PIDS+=($!)

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
timeout 120 radosgw-admin "${CONF[@]}" user create --uid=wanrl --display-name=wanrl \
    --access-key="$AWS_ACCESS_KEY_ID" --secret-key="$AWS_SECRET_ACCESS_KEY" > /dev/null
"$PYTHON" -m wanrl_s3.testing wait-s3 "http://127.0.0.1:$RGW_PORT" --timeout-s 120
"$PYTHON" -c "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:$RGW_PORT').create_bucket(Bucket='probe')"
radosgw --version
code=0
"$PYTHON" -m wanrl_s3.cli doctor --store s3://probe/run --endpoint-url "http://127.0.0.1:$RGW_PORT" || code=$?
exit "$code"
