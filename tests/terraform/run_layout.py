"""Keys of one run, named through the product's own layout (wanrl_s3.format.layout
and the store's upload staging), for the GCS and Azure policy tests: if the
layout moves a key, the policies are checked against where it moved to."""

from __future__ import annotations

from wanrl_s3.format import layout
from wanrl_s3.store.staging import UPLOADS_PREFIX, marker_key

PREFIX = "runs/exp-1"


def run_key(key: str) -> str:
    return f"{PREFIX}/{key}"


MANIFEST = run_key(layout.manifest_key(42))
PAYLOAD = run_key(layout.payload_key(42, "0f3a9c/000003.bin"))
VERSION_KEYS = [MANIFEST, PAYLOAD]
LATEST = run_key(layout.LATEST_KEY)
MARKER = run_key(marker_key("9b2e4f"))
PART = run_key(f"{UPLOADS_PREFIX}9b2e4f/00001")  # a staged part (gs:// only)
UPLOADS = run_key(UPLOADS_PREFIX)
OWN_STATUS = run_key(layout.worker_status_key("w7"))
OTHER_STATUS = run_key(layout.worker_status_key("w8"))
OUTSIDE = [
    "runs/exp-2/" + layout.manifest_key(1),
    "runs/exp-1-evil/" + layout.manifest_key(1),
    "runs/exp-1-evil/workers/w7.json",
    layout.LATEST_KEY,
]
# Names that end like a status object but sit elsewhere, or that sit in
# workers/ without being one.
LOOKALIKES = [run_key("v/w7.json"), run_key("w7.json"), run_key("workers/w7.txt")]
# List prefixes inside the run, and ones that would reach outside it.
LIST_INSIDE = [f"{PREFIX}/", run_key(f"{layout.VERSIONS_DIR}/"), UPLOADS]
LIST_OUTSIDE = ["", "runs/", PREFIX, "runs/exp-1-evil/"]
