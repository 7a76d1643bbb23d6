"""The fast part of the fault campaign (benchmarks/faults.py --quick): every counter is 0.

Every injected fault kind, publisher and worker kills, racing publishers, each
tampering (signed or not, as the seed picks), the relay over each tampering of
its primary, signing publishers over bases their readers do not trust, another
run's version planted under a running worker, full disks (a tmpfs; skipped, not
failed, where mounting is not permitted), fuzzed arguments, and the hostile
cases (a LATEST expiring under a worker, oversized payload objects, an oversized
LATEST and status object with peak memory measured, a junk manifest, a blocked
host cache, hostile local files and planner input), all through the real command
line against SeaweedFS (the session's ``weed mini``); bits flipped inside parts by
publishers with no prior ETag evidence, on moto (it stores a flipped part, where
SeaweedFS refuses it: the store's own upload confirmation must keep it out); and a
SeaweedFS cluster of its own whose volume server, then filer, crash while workers
download (benchmarks/cluster_outage.py: every worker converges bit-exact, no version is
lost or partly installed, and each worker's failures show in ``wanrl-s3 status``). The
whole campaign is its own command; its figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import boto3

from wanrl_s3.testing import make_bucket

CAMPAIGN = Path(__file__).resolve().parents[1] / "benchmarks" / "faults.py"


def load_campaign():  # type: ignore[no-untyped-def]
    """benchmarks/faults.py as the module ``faults`` (its child processes import it by name)."""
    sys.path.insert(0, str(CAMPAIGN.parent))
    spec = importlib.util.spec_from_file_location("faults", CAMPAIGN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["faults"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_campaign_finds_nothing(s3_endpoint: str, moto_endpoint: str, tmp_path: Path) -> None:
    make_bucket(s3_endpoint)  # the server answers before the clock starts
    faults = load_campaign()
    report = faults.run_campaign(
        s3_endpoint, 14, faults.Plan.quick(), tmp_path, unchecked_endpoint=moto_endpoint
    )
    assert _has_prefix(moto_endpoint, "multipart/")  # the flipped parts went to moto
    assert not _has_prefix(s3_endpoint, "multipart/")
    kinds = report["kinds"]
    for kind in ("slow_down", "internal_error", "reset_before", "reset_after", "truncate",
                 "trickle", "flip_request", "flip_response", "lost_manifest_create",
                 "lost_latest_cas", "publisher_kill", "worker_kill", "race", "fuzz",
                 "expiry_held", "oversized_payload", "junk_manifest", "host_cache_blocked",
                 "race_next", "hostile_input:header", "hostile_input:url",
                 "hostile_input:version", "hostile_input:have", "estimate_fuzz:fleet",
                 "estimate_fuzz:status", "truncated:s3", "cluster:volume_kill",
                 "cluster:filer_kill", "multipart_flip", "oversized:latest",
                 "oversized:status"):  # fmt: skip
        assert kinds[kind]["count"] >= 1, kind
    assert set(report["oversized_memory"]) == {"latest", "status"}  # both measured
    tampered = {k.split(":")[1] for k in kinds if k.startswith("tamper:")}
    assert tampered >= set(faults.Campaign.TAMPERINGS) | {"worker_latest"}
    relayed = {k.split(":")[1] for k in kinds if k.startswith("relay:")}
    assert relayed == set(faults.Campaign.RELAY_TAMPERINGS) | {"cross_run"}
    for kind in ("untrusted_base:bucket_writer", "untrusted_base:revoked", "cross_run"):
        assert kinds[kind]["count"] >= 1, kind
    assert sum(k["faults"] for k in kinds.values()) >= 10  # the proxy really injected
    if "full_disk" not in kinds:
        assert any("mount" in note for note in report["notes"]), report["notes"]
    head = faults.table(report).splitlines()[0].split()  # the table fails on a counter short
    assert head[4 : 4 + len(faults.COUNTERS)] == list(faults.SHORT)
    counters = {name: report[name] for name in faults.COUNTERS}
    assert counters == dict.fromkeys(faults.COUNTERS, 0), "\n".join(report["findings"])


def _has_prefix(endpoint: str, prefix: str) -> bool:
    """Whether a bucket on ``endpoint`` holds an object under ``prefix``."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    return any(
        s3.list_objects_v2(Bucket=b["Name"], Prefix=prefix, MaxKeys=1).get("KeyCount", 0)
        for b in s3.list_buckets()["Buckets"]
    )
