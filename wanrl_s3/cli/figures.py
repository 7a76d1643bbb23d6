"""What the CLI's plots share: matplotlib imported on demand, a bare figure, a PNG written.

matplotlib is optional (``wanrl-s3[plot]``) and imported only when a plot is asked
for, so no command pays for it otherwise. We draw on a bare ``Figure`` rather than
through pyplot: no global state, no GUI backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(width_in: float, height_in: float) -> Figure:
    """A bare figure with constrained layout; a UsageError if matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise UsageError("--plot needs matplotlib: pip install 'wanrl-s3[plot]'") from exc
    return Figure(figsize=(width_in, height_in), layout="constrained")


def save_png(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (folders made); a UsageError naming it if it cannot."""
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, format="png", dpi=110)
    except OSError as exc:
        raise UsageError(f"cannot write plot {out}: {exc.strerror or exc}") from exc
    return out
