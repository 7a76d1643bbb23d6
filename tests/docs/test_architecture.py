"""docs/architecture.md names every folder and module of wanrl_s3/.

A newcomer finds a module through the folder table: a module it leaves out is one
nobody can place. Each module at the root has a row of its own; each module in a
folder is named in backticks in that folder's row (``stem``, ``stem.py``, or the
path below the folder, such as ``watch/``'s modules in ``fetch/``'s row).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "wanrl_s3"


def folder_rows(text: str) -> dict[str, str]:
    """The folder table's rows by their first cell: ``errors.py``, ``fetch/``."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `([\w./]+)` \|", line)
        if match:
            rows[match.group(1)] = line
    return rows


def unnamed_modules(text: str, package: Path) -> list[str]:
    rows = folder_rows(text)
    missing = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).parts
        if path.name == "__init__.py" and len(parts) == 1:
            continue  # the package itself: the public API, described above the table
        if len(parts) == 1:
            if path.name not in rows:
                missing.append(path.name)
            continue
        row = rows.get(parts[0] + "/")
        if row is None:
            missing.append(f"{parts[0]}/ (no row)")
            continue
        if path.name == "__init__.py":
            continue
        named = set(re.findall(r"`([^`]+)`", row))
        names = {path.stem, path.name, "/".join((*parts[1:-1], path.stem))}
        if not any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", " ".join(named)) for n in names):
            missing.append("/".join(parts))
    return missing


def test_the_folder_table_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(folder_rows(text)) >= 10
    missing = unnamed_modules(text, PACKAGE)
    assert missing == [], "docs/architecture.md's folder table does not name: " + ", ".join(missing)


def test_the_check_finds_what_a_row_leaves_out(tmp_path: Path) -> None:
    (tmp_path / "fetch" / "watch").mkdir(parents=True)
    for name in ("__init__.py", "errors.py", "fetch/__init__.py", "fetch/files.py"):
        (tmp_path / name).touch()
    (tmp_path / "fetch" / "watch" / "poll.py").touch()
    (tmp_path / "fetch" / "subscriber.py").touch()
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "gc.py").touch()
    text = "| `errors.py` | x | - |\n| `fetch/` | `files` (pull), `watch/` (`poll`) | - |\n"
    assert unnamed_modules(text, tmp_path) == ["fetch/subscriber.py", "fleet/ (no row)"]
