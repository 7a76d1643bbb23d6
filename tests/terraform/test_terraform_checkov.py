"""checkov over terraform/: no failed check, and every suppression carries its
reason beside it. checkov lives in .venv-checkov (scripts/install-checkov.sh):
its exact pins would clash with the project's own environment."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from tf_support import CHECKOV_BIN, REPO_ROOT, TERRAFORM_DIR, tf_files

INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-checkov.sh"
SKIP_COMMENT = re.compile(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?$")


def pinned_version() -> str:
    match = re.search(r'^CHECKOV_VERSION="([^"]+)"', INSTALL_SCRIPT.read_text(), re.MULTILINE)
    assert match, f"{INSTALL_SCRIPT} must pin CHECKOV_VERSION"
    return match.group(1)


def test_every_suppression_states_its_reason() -> None:
    seen = 0
    for path in tf_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = SKIP_COMMENT.search(line.strip())
            if not match:
                continue
            seen += 1
            check_id, reason = match.group(1), (match.group(2) or "").strip()
            assert re.fullmatch(r"CKV2?_(AWS|GCP|AZURE)_[0-9]+", check_id), f"{path}:{lineno}"
            assert len(reason.split()) >= 8, (
                f"{path.relative_to(REPO_ROOT)}:{lineno}: suppression of {check_id} "
                "needs its reason after ':'"
            )
    assert seen, "no suppression found: drop this test's expectation or the parser broke"


@pytest.fixture(scope="module")
def checkov_report() -> dict[str, Any]:
    if not CHECKOV_BIN.exists():
        pytest.skip(
            f"{CHECKOV_BIN.relative_to(REPO_ROOT)} is missing: run scripts/install-checkov.sh "
            "(checkov is kept in its own venv; its pinned dependencies clash with ours)"
        )
    proc = subprocess.run(
        [
            str(CHECKOV_BIN),
            "--directory",
            str(TERRAFORM_DIR),
            "--framework",
            "terraform",
            "--compact",
            "--skip-download",  # offline: no guideline or policy download
            "--output",
            "json",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        parsed = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"checkov printed no JSON:\n{proc.stdout}\n{proc.stderr}") from exc
    reports = parsed if isinstance(parsed, list) else [parsed]
    (report,) = [r for r in reports if r.get("check_type") == "terraform"]
    report["returncode"] = proc.returncode
    return report


def test_checkov_is_the_pinned_version(checkov_report: dict[str, Any]) -> None:
    assert checkov_report["summary"]["checkov_version"] == pinned_version(), (
        "rerun scripts/install-checkov.sh to install the pinned checkov"
    )


def test_checkov_scanned_every_module(checkov_report: dict[str, Any]) -> None:
    summary = checkov_report["summary"]
    assert summary["parsing_errors"] == 0, checkov_report["results"].get("parsing_errors")
    assert summary["resource_count"] >= 20
    assert summary["passed"] > 100
    scanned = {
        c["file_path"].split("/")[2]
        for c in checkov_report["results"]["passed_checks"]
        if c["file_path"].startswith("/modules/")
    }
    assert scanned == {
        "snapshot-bucket",
        "replication",
        "iam",
        "gcs-snapshot-bucket",
        "gcs-iam",
        "azure-snapshot-container",
        "azure-iam",
        "cloudfront-cdn",
        "gcs-cloud-cdn",
    }


def test_checkov_reports_no_failed_checks(checkov_report: dict[str, Any]) -> None:
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for c in checkov_report["results"]["failed_checks"]
    ]
    assert failed == [], "\n".join(failed)
    assert checkov_report["returncode"] == 0


def test_checkov_skips_only_with_a_reason(checkov_report: dict[str, Any]) -> None:
    for check in checkov_report["results"]["skipped_checks"]:
        reason = check["check_result"].get("suppress_comment", "")
        assert len(reason.split()) >= 8, f"{check['check_id']} {check['resource']}: {reason!r}"


# The checks that must run (pass, or be skipped with a reason) on the GCS and
# Azure modules: the ones a bucket or account that is public, key-based or
# downgradable to old TLS would fail.
REQUIRED_CLOUD_CHECKS = {
    "gcs-snapshot-bucket": {"CKV_GCP_29", "CKV_GCP_114"},
    "azure-snapshot-container": {
        "CKV_AZURE_3",
        "CKV_AZURE_34",
        "CKV_AZURE_35",
        "CKV_AZURE_44",
        "CKV_AZURE_190",
        "CKV2_AZURE_38",
        "CKV2_AZURE_40",
        "CKV2_AZURE_47",
    },
}


def test_checkov_passes_the_core_checks_of_the_gcs_and_azure_modules(
    checkov_report: dict[str, Any],
) -> None:
    for module, required in REQUIRED_CLOUD_CHECKS.items():
        passed = {
            c["check_id"]
            for c in checkov_report["results"]["passed_checks"]
            if c["file_path"].startswith(f"/modules/{module}/")
        }
        assert required <= passed, f"{module}: not passed: {sorted(required - passed)}"
