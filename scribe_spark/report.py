"""Writing results: CSV tables, matplotlib figures and the Markdown summary."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    """Write a table with a header and no index."""
    df.to_csv(path, index=False, float_format="%.6g")
    return path


def figure(path: Path, title: str, xlabel: str, ylabel: str):
    """Return a (fig, ax) whose `save` writes the PNG to path; use as a context manager."""
    return _Figure(path, title, xlabel, ylabel)


class _Figure:
    def __init__(self, path: Path, title: str, xlabel: str, ylabel: str):
        self.path, self.title, self.xlabel, self.ylabel = path, title, xlabel, ylabel

    def __enter__(self):
        self.fig, self.ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
        return self.ax

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.ax.set_title(self.title)
            self.ax.set_xlabel(self.xlabel)
            self.ax.set_ylabel(self.ylabel)
            self.ax.grid(True, alpha=0.3)
            if self.ax.get_legend_handles_labels()[0]:
                self.ax.legend()
            self.fig.tight_layout()
            self.fig.savefig(self.path)
        plt.close(self.fig)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """Return a DataFrame as a GitHub Markdown table."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparable_tables(folder: Path) -> dict[str, bytes]:
    """Every table of one run (CSV bytes, Parquet schema and rows) except wall-clock timings."""
    import pyarrow.parquet as pq
    out = {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv")) if p.name != "timings.csv"}
    for p in sorted(folder.glob("*.parquet")):
        t = pq.read_table(p)
        out[p.name] = t.schema.to_string().encode() + repr(t.to_pydict()).encode()
    return out
