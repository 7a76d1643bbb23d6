"""Helpers for the Terraform checks: finding the tools, running them offline,
reading HCL, and a small IAM evaluator for the rendered policies.

Kept free of pytest fixtures so each test module can import what it needs."""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO_ROOT / "terraform"
EXAMPLE_DIR = TERRAFORM_DIR / "examples" / "multi-region"
HARNESS_DIR = Path(__file__).resolve().parent / "harness"
CHECKOV_BIN = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"

# Where an offline machine may keep provider plugins, in the layout that
# `terraform init -plugin-dir` and TF_PLUGIN_CACHE_DIR share:
# <dir>/registry.terraform.io/hashicorp/aws/<version>/<os>_<arch>/terraform-provider-aws*
PLUGIN_DIR_CANDIDATES = (
    os.environ.get("WANRL_TF_PLUGIN_DIR", ""),
    os.environ.get("TF_PLUGIN_CACHE_DIR", ""),
    "/opt/tf-plugins",
    "~/.terraform.d/plugins",
    "~/.terraform.d/plugin-cache",
    "/usr/local/share/terraform/plugins",
    "/usr/share/terraform/plugins",
)
AWS_PROVIDER_MAJOR = "5"  # the examples pin hashicorp/aws ~> 5.0


def terraform_bin() -> str | None:
    """Path of the terraform executable, or None."""
    return shutil.which("terraform")


def aws_plugin_dir() -> Path | None:
    """First plugin directory holding hashicorp/aws 5.x, or None."""
    for raw in PLUGIN_DIR_CANDIDATES:
        if not raw:
            continue
        base = Path(raw).expanduser()
        pattern = str(
            base
            / "registry.terraform.io/hashicorp/aws"
            / f"{AWS_PROVIDER_MAJOR}.*"
            / "*"
            / "terraform-provider-aws*"
        )
        if glob.glob(pattern):
            return base
    return None


def terraform_env() -> dict[str, str]:
    """Environment for terraform runs that must not touch the network or the
    caller's AWS credentials: no version checkpoint, no CLI config (every
    command passes what it needs), no AWS_* variables, no instance metadata."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        CHECKPOINT_DISABLE="1",
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        TF_CLI_CONFIG_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
    )
    env.pop("TF_DATA_DIR", None)
    env.pop("TF_WORKSPACE", None)
    return env


def run_terraform(
    args: list[str], cwd: Path, timeout_s: float = 300, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run terraform with `args` in `cwd` (feeding `stdin`); raise with its
    output on failure, except for `fmt -check`, whose exit code is the answer."""
    tf = terraform_bin()
    if tf is None:
        raise RuntimeError("terraform is not on PATH")
    # Flags must precede positional arguments, so -no-color goes right after the
    # subcommand (console takes none).
    argv = [tf, args[0], *([] if args[0] == "console" else ["-no-color"]), *args[1:]]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=terraform_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0 and not (args[0] == "fmt" and "-check" in args):
        raise RuntimeError(
            f"terraform {' '.join(args)} failed ({proc.returncode}) in {cwd}:\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    return proc


def init_offline(cwd: Path, plugin_dir: Path) -> None:
    """`terraform init` from a local plugin directory: no registry, no backend."""
    run_terraform(["init", "-backend=false", "-input=false", f"-plugin-dir={plugin_dir}"], cwd)


def copy_terraform_tree(dest: Path) -> Path:
    """Copy terraform/ to dest/terraform (without .terraform state) and return it,
    so init and plan never write into the work tree."""
    target = dest / "terraform"
    shutil.copytree(
        TERRAFORM_DIR,
        target,
        ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*"),
    )
    return target


def load_toml(text: str) -> dict[str, Any]:
    """Parse TOML with tomllib (Python >= 3.11) or tomli on 3.10."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import pytest

        tomllib = pytest.importorskip("tomli", reason="Python 3.10 needs tomli to read TOML")
    return tomllib.loads(text)


# ------------------------------------------------------------------ HCL


def tf_files() -> list[Path]:
    """Every .tf file under terraform/, sorted, ignoring .terraform caches."""
    return sorted(p for p in TERRAFORM_DIR.rglob("*.tf") if ".terraform" not in p.parts)


def load_hcl(path: Path) -> dict[str, Any]:
    """Parse one .tf file with python-hcl2 (>= 8): quotes stripped, no comments,
    no block markers, so string values read as they are written."""
    import hcl2

    opts = hcl2.SerializationOptions(
        with_comments=False, strip_string_quotes=True, explicit_blocks=False
    )
    with path.open(encoding="utf-8") as fh:
        return hcl2.load(fh, serialization_options=opts)


def load_dir(directory: Path) -> dict[str, list[Any]]:
    """Merge the top-level lists (resource, data, variable, ...) of a module's files."""
    merged: dict[str, list[Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        for key, items in load_hcl(path).items():
            merged.setdefault(key, []).extend(items)
    return merged


def blocks(module: dict[str, list[Any]], kind: str, type_: str) -> dict[str, dict[str, Any]]:
    """Named two-label blocks of a module: blocks(m, "resource", "aws_s3_bucket")
    -> {"this": {...}}."""
    found: dict[str, dict[str, Any]] = {}
    for item in module.get(kind, []):
        for name, body in item.get(type_, {}).items():
            found[name] = body
    return found


def one_label_blocks(module: dict[str, list[Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Named one-label blocks (variable, output, module): {"name": {...}}."""
    found: dict[str, dict[str, Any]] = {}
    for item in module.get(kind, []):
        found.update(item)
    return found


def locals_of(module: dict[str, list[Any]]) -> dict[str, Any]:
    """All locals of a module, merged."""
    merged: dict[str, Any] = {}
    for item in module.get("locals", []):
        merged.update(item)
    return merged


def walk_strings(node: Any) -> Iterator[str]:
    """Every string inside a parsed HCL value."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from walk_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk_strings(value)


# ------------------------------------------------------------------ plan JSON


def plan_resources(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """address -> values, from a `terraform show -json` plan: the data sources
    read at plan time (prior_state) and the planned managed resources."""
    found: dict[str, dict[str, Any]] = {}

    def walk(module: dict[str, Any]) -> None:
        for res in module.get("resources", []):
            found[res["address"]] = res["values"]
        for child in module.get("child_modules", []):
            walk(child)

    walk(plan.get("prior_state", {}).get("values", {}).get("root_module", {}))
    walk(plan["planned_values"]["root_module"])
    return found


def policy(values: dict[str, Any], key: str = "json") -> dict[str, Any]:
    """Decode a rendered policy document attribute."""
    raw = values[key]
    if not isinstance(raw, str):
        raise TypeError(f"policy attribute {key!r} is not rendered (got {raw!r})")
    return json.loads(raw)


# ------------------------------------------------------------------ IAM evaluation

_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _iam_glob(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    """IAM wildcard match: '*' any run of characters, '?' one character."""
    regex = fnmatch.translate(pattern.replace("[", "[[]"))
    flags = 0 if case_sensitive else re.IGNORECASE
    return re.fullmatch(regex, value, flags) is not None


def _substitute(pattern: str, context: dict[str, str]) -> str | None:
    """Replace IAM policy variables from `context`; None when one is missing
    (IAM then treats the statement as not matching)."""
    missing = False

    def repl(match: re.Match[str]) -> str:
        nonlocal missing
        key = match.group(1)
        if key not in context:
            missing = True
            return ""
        return context[key]

    out = _VARIABLE.sub(repl, pattern)
    return None if missing else out


def statement_allows(
    stmt: dict[str, Any], action: str, resource: str, context: dict[str, str]
) -> bool:
    """Whether one Allow statement covers (action, resource), conditions
    ignored: an over-approximation, the safe side for "cannot" checks."""
    if stmt.get("Effect") != "Allow":
        return False
    if "NotAction" in stmt or "NotResource" in stmt:
        raise ValueError(f"evaluator does not handle NotAction/NotResource: {stmt}")
    if not any(
        _iam_glob(a, action, case_sensitive=False) for a in _as_list(stmt.get("Action", []))
    ):
        return False
    for pattern in _as_list(stmt.get("Resource", [])):
        concrete = _substitute(pattern, context)
        if concrete is not None and _iam_glob(concrete, resource, case_sensitive=True):
            return True
    return False


def allows(
    doc: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None
) -> bool:
    """Whether an identity policy with no Deny statements allows the request
    (conditions ignored, see statement_allows)."""
    if any(s.get("Effect") == "Deny" for s in doc["Statement"]):
        raise ValueError("evaluator expects identity policies without Deny statements")
    return any(statement_allows(s, action, resource, context or {}) for s in doc["Statement"])


def action_patterns(doc: dict[str, Any], effect: str = "Allow") -> list[str]:
    """Every action pattern of the statements with `effect`."""
    return [a for s in doc["Statement"] if s.get("Effect") == effect for a in _as_list(s["Action"])]


def covers_action(pattern: str, action: str) -> bool:
    """Whether an action pattern (wildcards allowed) covers a concrete action."""
    return _iam_glob(pattern, action, case_sensitive=False)


# ------------------------------------------------------------------ GCS and Azure modules


def provider_plugin_dir(name: str, majors: tuple[str, ...]) -> Path | None:
    """First plugin directory holding hashicorp/<name> in one of `majors`, or None."""
    for raw in PLUGIN_DIR_CANDIDATES:
        if not raw:
            continue
        base = Path(raw).expanduser()
        for major in majors:
            pattern = base / "registry.terraform.io/hashicorp" / name / f"{major}.*" / "*"
            if glob.glob(str(pattern / f"terraform-provider-{name}*")):
                return base
    return None


def console_eval(module_dir: Path, variables: dict[str, Any], expression: str, work: Path) -> Any:
    """Evaluate `expression` (HCL, e.g. "local.x") in a provider-free module
    with `variables`, through `terraform console` (no init, no network), and
    return it decoded from JSON."""
    work.mkdir(parents=True, exist_ok=True)
    for path in module_dir.glob("*.tf"):
        shutil.copy(path, work / path.name)
    (work / "inputs.tfvars.json").write_text(json.dumps(variables), encoding="utf-8")
    proc = run_terraform(
        ["console", "-var-file=inputs.tfvars.json"], work, stdin=f"jsonencode({expression})\n"
    )
    # console prints the jsonencode()d text as a quoted HCL string.
    return json.loads(json.loads(proc.stdout.strip()))


def check_provider_pins(directory: Path, provider: str, min_major: str) -> None:
    """A reusable module pins terraform and `provider` (>= min_major) and
    configures no provider of its own: the caller picks project and region."""
    module = load_dir(directory)
    terraform = module["terraform"][0]
    assert terraform["required_version"].startswith(">= 1.")
    pinned = terraform["required_providers"][0][provider]
    assert pinned["source"] == f"hashicorp/{provider}"
    assert pinned["version"].startswith(f">= {min_major}")
    assert "provider" not in module


def check_provider_free(directory: Path) -> None:
    """A pure-computation module: no provider, no resource, no data source."""
    module = load_dir(directory)
    assert "required_providers" not in module["terraform"][0]
    assert not module.get("resource") and not module.get("data")
