"""Peak resident memory of every CLI path against the snapshot's size (issue 17).

    .venv/bin/python benchmarks/memory.py [--gib 1] [--json] [--pythonpath DIR]
    .venv/bin/python benchmarks/memory.py --gib 20      # file:// store; needs ~21 GB free

Each path runs as its own ``wanrl-s3`` subprocess: ``publish`` full, ``publish``
delta with the base adopted from the store, ``pull`` full, ``pull --have``, and
``worker --out-dir`` from nothing and from a file of the previous version. Two
figures per path: the child's peak RSS (``ru_maxrss`` from ``wait4``), and the
peaks of its anonymous and file-backed resident pages, sampled from
``/proc/PID/smaps_rollup`` every 20 ms (file-backed pages, memory maps of the
snapshot files, count in RSS like any other). The working set is the peak RSS
less the resident size of an interpreter that has only imported what the CLI
imports (measured the same way): what the path itself holds.

The 1 GiB run talks to a moto server (its own process: its memory is not the
path's). moto keeps every object in memory, so ``--gib 20`` uses a ``file://``
store instead, generates the two versions a tensor at a time (safetensors
written directly; v2 is deleted once published, for the disk) and runs the three
paths of a 20 GB delta: publish v2 as a delta against
v1 adopted from the store, and ``pull --have`` v1 to v2. It refuses to start
unless the machine has the memory free (``MemAvailable``) and the disk.
``--pythonpath`` runs the paths on another checkout (``git archive`` of an
older commit) for the before figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from wanrl_s3 import SafetensorsFile
from wanrl_s3.testing import (
    CREDENTIALS,
    dims_for_params,
    llama_like_layout,
    local_moto,
    make_bucket,
    nudge_state,
)

GiB = 2**30
SAMPLE_S = 0.02
IMPORTS = "import boto3, numpy, zstandard, blake3, wanrl_s3.cli.app, wanrl_s3.store.s3"


@dataclass(frozen=True)
class Row:
    path: str
    snapshot_bytes: int
    peak_rss_bytes: int  # ru_maxrss of the child
    peak_anon_bytes: int  # sampled from smaps_rollup
    peak_file_bytes: int  # Rss - Anonymous, sampled
    peak_sampled_rss_bytes: int  # Rss, sampled (ru_maxrss can inherit the parent's, see run)
    baseline_bytes: int  # an interpreter with the CLI's imports
    seconds: float
    command: str

    @property
    def ratio(self) -> float:
        return self.peak_rss_bytes / self.snapshot_bytes

    @property
    def working_set_bytes(self) -> int:
        return self.peak_rss_bytes - self.baseline_bytes


def _rollup(pid: int) -> tuple[int, int] | None:
    """(Rss, Anonymous) of ``pid`` in bytes, or None once it has gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0]) * 1024
    return fields.get("Rss", 0), fields.get("Anonymous", 0)


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int, int, int, float]:
    """Run ``argv`` in ``cwd`` (not this checkout, so ``--pythonpath`` decides which code
    runs); its peak RSS (wait4), peak anonymous, file-backed and total RSS sampled, seconds."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    peaks = [0, 0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            got = _rollup(proc.pid)
            if got is not None:
                peaks[0] = max(peaks[0], got[1])
                peaks[1] = max(peaks[1], got[0] - got[1])
                peaks[2] = max(peaks[2], got[0])
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{output.decode()[-2000:]}")
    return usage.ru_maxrss * 1024, peaks[0], peaks[1], peaks[2], time.monotonic() - start


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "wanrl_s3.cli", *args]


# ------------------------------------------------------------------ snapshots


def make_pair_small(work: Path, gib: float) -> tuple[Path, Path]:
    """v1 and v2 (1% of the weights moved one ulp) through ``python -m wanrl_s3.testing``."""
    v1, v2 = work / "v1.safetensors", work / "v2.safetensors"
    params = str(gib * GiB / 2)
    if not v1.exists():
        subprocess.run(
            [sys.executable, "-m", "wanrl_s3.testing", "make-policy", str(v1), "--params", params],
            check=True,
        )
    if not v2.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "wanrl_s3.testing",
                "make-policy",
                str(v2),
                "--next-of",
                str(v1),
                "--fraction",
                "0.01",
                "--seed",
                "1",
            ],
            check=True,
        )
    return v1, v2


def _write_streaming(path: Path, layout: list[tuple[str, tuple[int, ...]]], fill) -> None:  # type: ignore[no-untyped-def]
    """A .safetensors file written a tensor at a time (header first: the shapes are known)."""
    header: dict[str, object] = {}
    pos = 0
    for name, shape in layout:
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [pos, pos + size]}
        pos += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob)
        for i, (name, shape) in enumerate(layout):
            f.write(fill(i, name, shape).tobytes())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    tmp.rename(path)


def make_pair_big(work: Path, gib: float) -> tuple[Path, Path]:
    """v1 and v2 of ``gib`` GiB, generated a tensor at a time (never whole in memory).

    Values: N(0, 0.02) bf16 per tensor (cheap to draw at 20 GB; the codec sees the
    spread of a trained layer's exponents), v2 moves 1% of them one ulp.
    """
    layout = llama_like_layout(dims_for_params(int(gib * GiB / 2)))
    v1, v2 = work / "v1.safetensors", work / "v2.safetensors"

    def first(i: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
        rng = np.random.default_rng(i)
        return (rng.standard_normal(shape, np.float32) * np.float32(0.02)).astype(
            ml_dtypes.bfloat16
        )

    if not v1.exists():
        _write_streaming(v1, layout, first)
    if not v2.exists():
        old = SafetensorsFile(v1)

        def second(i: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
            return nudge_state({name: np.array(old.array(name))}, 0.01, seed=i)[name]

        _write_streaming(v2, layout, second)
    return v1, v2


# ------------------------------------------------------------------ the paths


@contextmanager
def store_for(gib: float, work: Path) -> Iterator[tuple[str, list[str]]]:
    """The store URL and the CLI's store arguments: moto for small runs, file:// for big."""
    if gib > 4:
        url = f"file://{work}/store"
        yield url, ["--store", url]
        return
    with local_moto() as endpoint:
        url = f"s3://{make_bucket(endpoint)}/mem"
        yield url, ["--store", url, "--endpoint-url", endpoint]


def paths(
    work: Path, v1: Path, v2: Path, store: list[str], big: bool
) -> list[tuple[str, list[str]]]:
    pull1, pull2, w_new, w_old = (
        work / n for n in ("pull1.safetensors", "pull2.safetensors", "worker-new", "worker-old")
    )
    steps = [
        ("publish full", cli("publish", str(v1), *store, "--version", "1", "--delta", "never")),
        ("publish delta (base from the store)", cli("publish", str(v2), *store, "--version", "2")),
    ]
    if big:  # the delta pair only: pull --have from the v1 source file itself (identified)
        return [
            *steps,
            (
                "pull --have",
                cli("pull", *store, "--version", "2", "--have", str(v1), "--out", str(pull2)),
            ),
        ]
    return [
        *steps,
        ("pull full", cli("pull", *store, "--version", "1", "--out", str(pull1))),
        (
            "pull --have",
            cli("pull", *store, "--version", "2", "--have", str(pull1), "--out", str(pull2)),
        ),
        (
            "worker --out-dir (from nothing)",
            cli(
                "worker",
                *store,
                "--out-dir",
                str(w_new),
                "--exit-after",
                "1",
                "--poll-interval-s",
                "0.2",
            ),
        ),
        (
            "worker --out-dir (delta from v1)",
            cli(
                "worker",
                *store,
                "--out-dir",
                str(w_old),
                "--exit-after",
                "1",
                "--poll-interval-s",
                "0.2",
            ),
        ),
    ]


def run(args: argparse.Namespace) -> list[Row]:
    work = Path(args.work)
    for stale in ("store", "pull1.safetensors", "pull2.safetensors", "worker-new", "worker-old"):
        target = work / stale
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    big = args.gib > 4
    # generated in a child: Linux keeps a process's peak RSS across fork and exec, so a
    # parent that grew while generating would lend its peak to every path's ru_maxrss
    subprocess.run([sys.executable, __file__, "--generate", "--gib", str(args.gib),
                    "--work", str(work)], check=True)  # fmt: skip
    v1, v2 = work / "v1.safetensors", work / "v2.safetensors"
    size = sum(a.nbytes for _, a in SafetensorsFile(v1).items())
    env = {**CREDENTIALS, **os.environ}
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    baseline = measure([sys.executable, "-c", IMPORTS], env, work)[0]
    rows = []
    with store_for(args.gib, work) as (_, store):
        for name, argv in paths(work, v1, v2, store, big):
            if not name.startswith(args.only):
                continue
            if name.endswith("(delta from v1)"):
                (work / "worker-old").mkdir(exist_ok=True)
                shutil.copy(work / "pull1.safetensors", work / "worker-old" / "model.safetensors")
            rss, anon, file_bytes, sampled, seconds = measure(argv, env, work)
            shown = " ".join(a.replace(str(work), "$W") for a in argv[1:])
            rows.append(Row(name, size, rss, anon, file_bytes, sampled, baseline, seconds, shown))
            if big and name.startswith("publish delta"):
                v2.unlink()  # published: its disk is needed for the pulled file
            print(f"  {name}: {rss / size:.2f}x ({seconds:.1f} s)", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| path | peak RSS / snapshot | peak RSS | anon peak | file-backed peak "
        "| working set | s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.path} | {r.ratio:.2f}x | {r.peak_rss_bytes / 2**20:,.0f} MiB "
            f"| {r.peak_anon_bytes / 2**20:,.0f} MiB | {r.peak_file_bytes / 2**20:,.0f} MiB "
            f"| {r.working_set_bytes / 2**20:,.0f} MiB | {r.seconds:.1f} |"
        )
    snap = rows[0].snapshot_bytes if rows else 0
    lines.append(
        f"\nsnapshot {snap / GiB:.2f} GiB; interpreter baseline "
        f"{rows[0].baseline_bytes / 2**20:.0f} MiB"
        if rows
        else ""
    )
    return "\n".join(lines)


def check_machine(gib: float, work: Path) -> None:
    """Refuse a big run the machine cannot hold: no swap here, so be sure first."""
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    available = int(meminfo["MemAvailable"].split()[0]) * 1024
    free_disk = shutil.disk_usage(work if work.exists() else work.parent).free
    need_disk = gib * GiB * 3.0  # v1 and v2 (v2 deleted once published), the store, the pull
    print(
        f"memory available {available / GiB:.1f} GiB, disk free {free_disk / GiB:.0f} GiB",
        file=sys.stderr,
    )
    if gib > 4 and available < 2 * GiB + 0.2 * gib * GiB:
        raise SystemExit("not enough free memory for this run: close other jobs first")
    if free_disk < need_disk:
        raise SystemExit(f"needs about {need_disk / GiB:.0f} GiB of free disk")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0, help="snapshot size (default 1)")
    p.add_argument("--work", default="/tmp/wanrl-memory", help="where files and the store go")
    p.add_argument("--pythonpath", default=None, help="run the CLI from this checkout instead")
    p.add_argument("--only", default="", metavar="PREFIX",
                   help="only the paths whose name starts with PREFIX (e.g. publish)")  # fmt: skip
    p.add_argument("--json", action="store_true")
    p.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.generate:
        (make_pair_big if args.gib > 4 else make_pair_small)(Path(args.work), args.gib)
        return
    check_machine(args.gib, Path(args.work))
    rows = run(args)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        **asdict(r),
                        "ratio": round(r.ratio, 3),
                        "working_set_bytes": r.working_set_bytes,
                    }
                    for r in rows
                ],
                indent=1,
            )
        )
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
