"""Writing results: CSV tables, matplotlib figures and the Markdown summary."""
from __future__ import annotations

import html
import math
import os
import re
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator, NullLocator  # noqa: E402

CDF_POINTS = 10_000     # steps drawn at most per distribution: more are not visible, and slow to draw
_vector = False          # inside `vector_copies(True)`: each figure is also saved as a PDF


@contextmanager
def vector_copies(on: bool) -> Iterator[None]:
    """Within the block, save each figure as a vector PDF too, beside its PNG (a job's --pdf)."""
    global _vector
    before, _vector = _vector, on
    try:
        yield
    finally:
        _vector = before


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    """Write a table with a header and no index."""
    df.to_csv(path, index=False, float_format="%.6g")
    return path


def write_tables(outcome: Any, declared: dict[str, Any], folder: Path) -> None:
    """Write an experiment's tables as `<name>.csv`, each checked against its declaration first.

    A table that is not declared, a declared one missing (unless optional) or columns other than
    the declared ones, in their order, is an error of the experiment's code, raised before writing.
    """
    tables = outcome.tables
    unknown = sorted(set(tables) - set(declared))
    missing = sorted(n for n, t in declared.items() if n not in tables and not t.optional)
    if unknown or missing:
        raise ValueError(f"tables not declared: {unknown}; declared tables not made: {missing}")
    for name, frame in tables.items():
        if list(frame.columns) != declared[name].names:
            raise ValueError(f"table {name}: columns {list(frame.columns)}, declared {declared[name].names}")
    for name, frame in tables.items():
        write_csv(frame, folder / declared[name].file)


def figure(path: Path, title: str, xlabel: str, ylabel: str):
    """Return a context manager giving the axes; on leaving it, the figure is written to `path`."""
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
            key = legend(self.ax)
            self.fig.tight_layout()
            # nothing clipped, and a legend beside the axes widens the image
            extra = [key] if key else None
            self.fig.savefig(self.path, bbox_inches="tight", bbox_extra_artists=extra)
            if _vector:   # no creation date, so that the same figure gives the same bytes
                self.fig.savefig(self.path.with_suffix(".pdf"), bbox_inches="tight", bbox_extra_artists=extra,
                                 metadata={"CreationDate": None})
        plt.close(self.fig)


LEGEND_INSIDE = 3   # series a legend may list inside the axes; more go beside them, off the data


def legend(ax) -> Legend | None:
    """Label the series that hold data: inside the axes for a few, beside them for more.

    Lines that draw the same points lie on top of each other; they get one entry, their labels
    stacked and joined by "=", their styles drawn over each other as in the plot, and they count
    one by one towards the legend's place (bars and error bars are never merged). Their strokes
    take turns along the curve (`_interleave`), so that each colour shows. A legend the plot
    placed itself is kept as it is.
    """
    if ax.get_legend() is not None:
        return None
    groups: dict[object, list] = {}
    for h, label in zip(*ax.get_legend_handles_labels()):
        if _has_data(h):
            groups.setdefault(_points(h), []).append((h, label))
    for g in groups.values():
        _interleave([h for h, _ in g])
    handles = [g[0][0] if len(g) == 1 else tuple(h for h, _ in g) for g in groups.values()]
    labels = ["\n= ".join(label for _, label in g) for g in groups.values()]
    if not handles:
        return None
    if sum(map(len, groups.values())) <= LEGEND_INSIDE:
        ax.legend(handles, labels, fontsize="small")
        return None
    outside = ax.legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    outside.set_in_layout(False)   # the axes keep their width; the saved image widens to hold it
    return outside


def _interleave(lines: list, period: float = 12.0) -> None:
    """Dash coinciding lines so that their strokes take turns, one `period` (points) for all (markers kept).

    Matplotlib scales a dash pattern by the line's width, so each line's pattern is divided by it;
    a period of 12 points shows every colour in a legend handle (about 17 points) for up to 4 lines.
    """
    drawn = [h for h in lines if isinstance(h, Line2D) and h.get_linestyle() not in ("None", "", " ")]
    n = len(drawn)
    for i, line in enumerate(drawn if n > 1 else []):
        scale = max(line.get_linewidth(), 0.1) if matplotlib.rcParams["lines.scale_dashes"] else 1.0
        dash = period / n / scale
        line.set_linestyle((((n - i) % n) * dash, (dash, (n - 1) * dash)))


def _points(handle: object) -> object:
    """A line's coordinates, draw style and points (lines that share them coincide); else its own key."""
    if not isinstance(handle, Line2D):
        return id(handle)
    try:   # get_xydata converts units (dates, categories) to floats
        return id(handle.get_transform()), handle.get_drawstyle(), handle.get_xydata().tobytes()
    except (TypeError, ValueError):
        return id(handle)


def _has_data(handle) -> bool:
    """Whether a legend handle draws anything: a line with points, bars, an error-bar series."""
    if isinstance(handle, ErrorbarContainer):
        handle = handle.lines[0]
    if isinstance(handle, BarContainer):
        return len(handle.patches) > 0
    if hasattr(handle, "get_xdata"):
        return handle.get_xdata() is not None and len(handle.get_xdata()) > 0
    return True


def log_x(ax, values) -> None:
    """Put the x axis on a log scale with one labelled tick per sweep point (`values`), no others."""
    ticks = sorted({float(v) for v in values if v > 0})
    ax.set_xscale("log")
    ax.set_xticks(ticks, [short_count(v) for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def short_count(v: float) -> str:
    """Write a count briefly: 300, 3k, 2.5M."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.4g}{unit}"
    return f"{v:g}"


def whole_x(ax) -> None:
    """Tick the x axis at whole numbers only (hops, rounds)."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def cdf(ax, values, **style) -> None:
    """Draw the empirical CDF of `values` as a step line: at most CDF_POINTS steps, evenly spaced
    in rank (each within 1/CDF_POINTS of the exact curve), so that 10^7 values draw in a moment."""
    v = np.sort(np.asarray(values, dtype=float))
    ranks = np.arange(len(v))
    if len(v) > CDF_POINTS:
        ranks = np.unique(np.linspace(0, len(v) - 1, CDF_POINTS).astype(np.int64))
    ax.step(v[ranks], (ranks + 1) / max(len(v), 1), where="post", **style)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """Return a DataFrame as a GitHub Markdown table (floats in `floatfmt` where it stays within 1%)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = [float_cell(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def float_cell(v: float, fmt: str) -> str:
    """Write `v` in `fmt`, or to three significant digits where `fmt` would be off by more than 1%.

    A table's format suits its measured values; a small one, such as a 0.05 ms service time or a 2%
    loss in a table of one decimal, would read as 0.1 or 0.0.
    """
    text = format(v, fmt)
    try:
        shown = float(text)
    except ValueError:   # a format that writes more than a number (%, thousands separators)
        return text
    if math.isfinite(v) and abs(shown - v) > 0.01 * abs(v):
        return format(v, ".3g")
    return text


def comparable_tables(folder: Path) -> dict[str, bytes]:
    """Every table of one run (CSV bytes, Parquet schema and rows) except wall-clock timings."""
    import pyarrow.parquet as pq
    out = {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv")) if p.name != "timings.csv"}
    for p in sorted(folder.glob("*.parquet")):
        t = pq.read_table(p)
        out[p.name] = t.schema.to_string().encode() + repr(t.to_pydict()).encode()
    return out


# ------------------------------------------------------------------ one page for a whole run

_INLINE = (
    (re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)"),
     lambda m, pre: f'<img alt="{m[1].replace(chr(34), "&quot;")}" src="{_rel(m[2], pre)}">'),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), lambda m, pre: f'<a href="{_rel(m[2], pre)}">{m[1]}</a>'),
    (re.compile(r"`([^`]+)`"), lambda m, pre: f"<code>{m[1]}</code>"),
    (re.compile(r"\*\*([^*]+)\*\*"), lambda m, pre: f"<strong>{m[1]}</strong>"),
)


ANCHOR = re.compile(r'<a id="[\w-]+"></a>')


def _rel(target: str, prefix: str) -> str:
    """A link of a Markdown file as seen from the page (relative targets get the file's folder); the
    target is already HTML-escaped text, the prefix is escaped here."""
    if re.match(r"^([a-z]+:|#|/)", target):
        return target.replace('"', "&quot;")
    return html.escape(prefix, quote=True) + target.replace('"', "&quot;")


def _inline(text: str, prefix: str) -> str:
    out = html.escape(text, quote=False)
    for pattern, make in _INLINE:
        out = pattern.sub(lambda m: make(m, prefix), out)
    return out


def markdown_html(text: str, prefix: str = "") -> str:
    """The Markdown our summaries and the report use (headings, tables, lists, paragraphs) as HTML."""
    out, para, lines = [], [], text.splitlines()

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para), prefix)}</p>")
            para.clear()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            flush()
        elif ANCHOR.fullmatch(line.strip()):   # the report's figure anchors: the only HTML let through
            flush()
            out.append(line.strip())
        elif m := re.match(r"^(#{1,4})\s+(.*)$", line):
            flush()
            out.append(f"<h{len(m[1])}>{_inline(m[2], prefix)}</h{len(m[1])}>")
        elif line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = re.split(r"(?<!\\)\|", lines[i].strip()[1:-1])
                rows.append([c.strip().replace("\\|", "|") for c in cells])
                i += 1
            body = [r for r in rows[1:] if not all(re.fullmatch(r":?-+:?", c) for c in r)]
            out.append('<div class="table"><table><tr>'
                       + "".join(f"<th>{_inline(c, prefix)}</th>" for c in rows[0]) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c, prefix)}</td>" for c in r) + "</tr>"
                                 for r in body) + "</table></div>")
            continue
        elif line.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:], prefix)}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        else:
            para.append(line.strip())
        i += 1
    flush()
    return "\n".join(out)


LISTED = (".csv", ".toml", ".md", ".parquet", ".pdf")   # a run's files the index page links to

# A contents sidebar beside the results; a wide table scrolls inside its own box; a plot shows at up to
# 900 px (its natural size) and never wider than the column
_STYLE = ("body{font-family:sans-serif;margin:0;line-height:1.4;color:#222}"
          "nav{position:fixed;top:0;left:0;bottom:0;width:15em;overflow-y:auto;padding:1em;"
          "background:#f6f6f6;border-right:1px solid #ccc;box-sizing:border-box;font-size:.9em}"
          "nav ul{list-style:none;padding-left:0;margin:0}nav ul ul{padding-left:1em;font-size:.92em}"
          "nav a{text-decoration:none}nav a:hover{text-decoration:underline}"
          "main{margin-left:15em;padding:1em 2em;max-width:1000px;box-sizing:border-box;min-width:0}"
          "div.table{overflow-x:auto;max-width:100%;margin:.5em 0}"
          "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #bbb;padding:2px 6px;"
          "text-align:left;white-space:nowrap}th{background:#eee}"
          "img{display:block;width:900px;max-width:100%;height:auto;margin:.6em 0}"
          "section{border-top:3px solid #444;margin-top:2em}code{background:#f3f3f3}"
          "@media (max-width:700px){nav{position:static;width:auto;border-right:none}main{margin-left:0}}")


def _image(target: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt, quote=True)}" src="{html.escape(target, quote=True)}">'


def _link(target: str, text: str) -> str:
    return f'<a href="{html.escape(target, quote=True)}">{html.escape(text)}</a>'


def write_index(root: Path, title: str) -> Path:
    """Write root/index.html: every run's summary (a report first), its plots and tables, on one page
    with a contents sidebar.

    The page needs no server or network: plots are linked relatively, so it works wherever the
    folder is copied. Written atomically.
    """
    parts = [("reproduce", "report.md")] if (root / "reproduce" / "report.md").is_file() else []
    parts += [(d.name, "summary.md") for d in sorted(root.iterdir())
              if d.is_dir() and not d.name.startswith(".") and (d / "summary.md").is_file()]
    body, toc = [], []
    for name, md in parts:
        section, headings = _section(root / name, name, md)
        body.append(section)
        inner = "".join(f'<li><a href="#{html.escape(a)}">{html.escape(t)}</a></li>' for a, t in headings)
        toc.append(f'<li><a href="#{html.escape(name)}">{html.escape(name)}</a>'
                   + (f"<ul>{inner}</ul>" if inner else "") + "</li>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<style>{_STYLE}</style></head>"
            f"<body><nav><strong>Contents</strong><ul>{''.join(toc)}</ul></nav><main>"
            f"<h1>{html.escape(title)}</h1><p>{len(parts)} result folders in <code>{html.escape(str(root))}"
            f"</code>, page written {datetime.now():%Y-%m-%d %H:%M}.</p>" + "\n".join(body)
            + "</main></body></html>\n")
    tmp = root / f".index.html.tmp-{os.getpid()}"
    try:
        tmp.write_text(page)
        os.replace(tmp, root / "index.html")
    finally:
        tmp.unlink(missing_ok=True)
    return root / "index.html"


def _section(folder: Path, name: str, md: str) -> tuple[str, list[tuple[str, str]]]:
    """One result folder as a section (its summary, the plots it does not show, its files) and the
    (anchor, text) of its second-level headings for the contents."""
    text = (folder / md).read_text()
    shown = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text))
    plots = [p.name for p in sorted(folder.glob("*.png")) if p.name not in shown]
    files = [p.name for p in sorted(folder.iterdir()) if p.suffix in LISTED]
    headings = []

    def anchored(m: re.Match) -> str:
        anchor = f"{name}-{len(headings) + 1}"
        headings.append((anchor, re.sub(r"<[^>]+>", "", m[1])))
        return f'<h2 id="{html.escape(anchor, quote=True)}">{m[1]}</h2>'
    summary = re.sub(r"<h2>(.*?)</h2>", anchored, markdown_html(text, f"{name}/"))
    section = (f'<section id="{html.escape(name, quote=True)}">' + summary
               + "".join(_image(f"{name}/{p}", p) for p in plots)
               + "<p>Files: " + ", ".join(_link(f"{name}/{f}", f) for f in files) + "</p></section>")
    return section, headings


if __name__ == "__main__":   # python -m scribe_spark.report DIR "TITLE": the one-page view of DIR
    import sys
    print(write_index(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else Path(sys.argv[1]).name))
