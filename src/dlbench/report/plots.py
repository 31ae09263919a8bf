"""Bar charts of study tables as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlbench.errors import UserError
from dlbench.report.study import StudyTable


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend, or a UserError naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plots needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt

    return plt


def bar_chart(tables: Sequence[StudyTable], path: Path, title: str) -> Path:
    """One PNG with a panel per table: a bar per row, error bars where known."""
    plt = pyplot()
    figure, axes = plt.subplots(1, len(tables), figsize=(6 * len(tables), 4.8), squeeze=False)
    for axis, table in zip(axes[0], tables, strict=True):
        labels = [row.label for row in table.rows]
        values = [row.value for row in table.rows]
        low = [row.value - row.spread[0] if row.spread else 0.0 for row in table.rows]
        high = [row.spread[1] - row.value if row.spread else 0.0 for row in table.rows]
        has_spread = any(row.spread for row in table.rows)
        axis.bar(
            range(len(values)),
            values,
            yerr=[low, high] if has_spread else None,
            capsize=4,
            color="#4c72b0",
        )
        axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
        axis.set_ylabel(table.metric.unit)
        axis.set_title("\n".join(textwrap.wrap(table.title, 60)), fontsize=8)
        for index, row in enumerate(table.rows):
            if row.relative is not None:
                axis.annotate(
                    f"{row.relative:.2f}x", (index, row.value), ha="center", va="bottom", fontsize=7
                )
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
