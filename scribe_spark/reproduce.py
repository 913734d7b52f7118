"""`./run.sh reproduce`: run every paper-scale setup, then write the paper-vs-simulation report.

    ./run.sh reproduce [--out DIR] [--confs DIR] [--published FILE.csv] [--master URL] [--resume]
    ./run.sh reproduce --metrics        # the figure and metric names a published-values file may use

Everything is checked before the first job starts: each job's parameters, the output folder and
the published-values file. Each job then runs as `./run.sh JOB` into `DIR/JOB/` (atomic, as
always), and the report is written into `DIR/reproduce/` (report.md, one PNG per figure and the
published values it read) and `DIR/index.html` (every summary and plot of the run on one page).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd

from scribe_spark import cli, config, loader, papers
from scribe_spark.cli import environment, folder
from scribe_spark.cli.args import Parser, UsageError, project_root
from scribe_spark.cli.endings import EXIT_BAD_INPUT, EXIT_CLUSTER_CONFIG, EXIT_MASTER

PUBLISHED_COLUMNS = ("figure", "metric", "value", "source")
FOLDER = "reproduce"


class PublishedError(ValueError):
    """The published-values file cannot be used."""


@dataclass(frozen=True)
class Setup:
    """A checked reproduce command: the jobs and their parameter files, the output root, published values."""

    out: Path
    out_given: bool
    confs: dict[str, Path]
    params: dict[str, dict]
    published: pd.DataFrame
    published_file: Path | None
    resume: bool
    master: str | None
    pdf: bool = False


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog="reproduce", description="Run every paper-scale setup and write the report.")
    ap.add_argument("--out", help="output root (default data/out/reproduce-<timestamp>)")
    ap.add_argument("--confs", help="folder of parameter files <job>.toml; a job without one there takes "
                                    "conf/reproduce/<job>.toml, else conf/<job>.toml")
    ap.add_argument("--published", help="CSV of published values: columns figure, metric, value, source")
    ap.add_argument("--master", help="Spark master for every job (default local[*])")
    ap.add_argument("--resume", action="store_true",
                    help="keep the jobs complete in --out, continue unfinished ones, write the report again")
    ap.add_argument("--metrics", action="store_true", help="list the figures and metric names, then exit")
    ap.add_argument("--pdf", action="store_true", help="also write each plot as a vector PDF beside its PNG")
    return ap.parse_args(argv)


def conf_for(job: str, confs: Path | None) -> Path:
    """The parameter file `reproduce` runs a job with."""
    root = project_root() / "conf"
    for place in ([confs] if confs else []) + [root / FOLDER]:
        if (place / f"{job}.toml").is_file():
            return place / f"{job}.toml"
    return root / f"{job}.toml"


def as_dict(params) -> dict:
    """A job's resolved parameters as its params.toml holds them."""
    return tomllib.loads(loader.to_toml(params))


def plan(argv: list[str]) -> Setup:
    """Check the command line, every job's parameters, the output folder and the published values."""
    args = parse_args(argv)
    if args.master is not None:
        environment.check_master(args.master)
    environment.check_environment("job", args.master or "local[*]")
    if args.resume and not args.out:
        raise UsageError("--resume needs --out DIR, the output root of the run to continue")
    out = Path(args.out).resolve() if args.out else (
        project_root() / "data" / "out" / datetime.now().strftime("reproduce-%Y%m%d-%H%M%S"))
    confs_dir = Path(args.confs) if args.confs else None
    if confs_dir is not None and not config.is_dir(confs_dir):
        raise UsageError(f"--confs {confs_dir}: not a folder")
    confs, params = {}, {}
    for job in papers.JOBS:
        confs[job] = conf_for(job, confs_dir)
        try:   # with --resume, an unfinished run of other parameters is refused now, not at its turn
            resume = ["--resume"] if args.resume else []
            p = cli.plan(job, ["--conf", str(confs[job]), "--out", str(out), *resume])
        except config.ConfigError as e:
            raise config.ConfigError(f"{job} ({confs[job]}): {e}") from None
        if isinstance(p.params, config.ScribeParams) and p.params.proximity != "transit-stub":
            raise config.ConfigError(f"{job} ({confs[job]}): key 'proximity': must be 'transit-stub' here, "
                                     f"the network of the paper's figures (got {p.params.proximity!r})")
        params[job] = as_dict(p.params)
    published = read_published(Path(args.published), params) if args.published else empty_published()
    return Setup(out, bool(args.out), confs, params, published,
                 Path(args.published).resolve() if args.published else None, args.resume, args.master,
                 args.pdf)


# ------------------------------------------------------------------ published values

def empty_published() -> pd.DataFrame:
    """A published-values frame with no rows."""
    return pd.DataFrame(columns=["figure", "metric", "variant", "x", "value", "source", "line", "key"])


def read_published(path: Path, params: dict[str, dict]) -> pd.DataFrame:
    """Read and check a published-values file against the figures; one error names the line and the key."""
    where = f"--published {path}"
    if not config.is_file(path):
        raise PublishedError(f"{where}: file not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise PublishedError(f"{where}: not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in PUBLISHED_COLUMNS if c not in df.columns]
    if missing:
        raise PublishedError(f"{where}: missing column(s) {', '.join(missing)} "
                             f"(needs {', '.join(PUBLISHED_COLUMNS)})")
    rows = []
    for i, r in enumerate(df.itertuples(index=False), start=2):   # line 1 is the header
        at = f"{where}, line {i}"
        fig = papers.BY_NAME.get(r.figure.strip())
        if fig is None:
            raise PublishedError(f"{at}: unknown figure '{r.figure}' (figures: {', '.join(papers.BY_NAME)})")
        name, variant, x = parse_metric(r.metric.strip(), fig, params[fig.job], at)
        value = _finite(r.value)
        if value is None:
            raise PublishedError(f"{at}: value '{r.value}' of {fig.name} {r.metric} is not a finite number")
        source = " ".join(r.source.split())   # one line, whatever the file's quoting held
        if not source:
            raise PublishedError(f"{at}: the source of {fig.name} {r.metric} is empty "
                                 "(say where the value is from)")
        x_key = papers.norm_x(x) if x else ""
        rows.append({"figure": fig.name, "metric": name, "variant": variant, "x": x, "value": value,
                     "source": source, "line": i, "key": papers.key(name, variant, x_key)})
    return pd.DataFrame(rows, columns=empty_published().columns) if rows else empty_published()


def parse_metric(text: str, fig: papers.Figure, params: dict, at: str) -> tuple[str, str, str]:
    """Split `name[variant]@x` and check each part against the figure; return (name, variant, x)."""
    m = papers.KEY.match(text)
    metric = fig.metric(m.group("name")) if m else None
    if metric is None:
        raise PublishedError(f"{at}: figure '{fig.name}' has no metric '{text}' "
                             f"(metrics: {', '.join(usage(fig, mt, params) for mt in fig.metrics)})")
    dims = fig.dims(params)
    variant, x = (m.group("variant") or "").strip(), (m.group("x") or "").strip()
    write = usage(fig, metric, params)

    def bad(why: str) -> PublishedError:
        return PublishedError(f"{at}: {fig.name} {text}: {why} (write {write})")
    if metric.variant and variant not in dims[metric.variant]:
        raise bad(f"{metric.variant} must be one of {', '.join(dims[metric.variant])}")
    if not metric.variant and variant:
        raise bad("this metric has no variant")
    if metric.x is None and x:
        raise bad("this metric has no x")
    if metric.x is not None:
        if not x:
            raise bad(f"needs @{metric.x}")
        if metric.x in dims and x not in dims[metric.x]:
            raise bad(f"{metric.x} must be one of {', '.join(dims[metric.x])}")
        if metric.x not in dims and _finite(x) is None:
            raise bad(f"{metric.x} must be a finite number")
    return metric.name, variant, x


def _finite(text: str) -> float | None:
    """The number `text` spells, or None if it is not a finite number."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def usage(fig: papers.Figure, metric: papers.Metric, params: dict | None) -> str:
    """How a metric is written, e.g. `relative_distance[mode]@nodes` (with the mode's values if known)."""
    dims = fig.dims(params) if params is not None else {}
    text = metric.name
    if metric.variant:
        text += f"[{'|'.join(dims[metric.variant]) if metric.variant in dims else metric.variant}]"
    if metric.x:
        text += f"@{'|'.join(dims[metric.x]) if metric.x in dims else metric.x}"
    return text


# ------------------------------------------------------------------ the report

def ours(fig: papers.Figure, folder: Path, params: dict, pub: pd.DataFrame | None = None) -> pd.DataFrame:
    """Our values of a figure's metrics, read from its job's tables (pub: published points to read at)."""
    rows = fig.values(folder, params, empty_published() if pub is None else pub)
    out = pd.DataFrame(rows, columns=["metric", "variant", "x", "value"])
    stray = set(out.metric) - {m.name for m in fig.metrics}
    if stray:
        raise RuntimeError(f"figure {fig.name}: the reader returned undeclared metrics {sorted(stray)}")
    out["variant"] = out.variant.astype(str)
    out["key"] = [papers.key(*k) for k in zip(out.metric, out.variant, out.x)]
    return out


def comparison(mine: pd.DataFrame, pub: pd.DataFrame) -> pd.DataFrame:
    """Our values beside the published ones (matched on metric, variant and x), with the ratio."""
    table = [{"metric": k, "ours": v, "published": None, "ratio": None, "source": ""}
             for k, v in zip(mine.key, mine.value)]
    index = {k: i for i, k in enumerate(mine.key)}
    extra = []
    for r in pub.itertuples():
        row = table[index[r.key]] if r.key in index else None
        if row is not None and row["published"] is None:
            row.update(published=r.value, source=r.source)
        else:   # a second source for the same value, or a point we did not measure
            extra.append({"metric": r.key, "ours": row["ours"] if row else None, "published": r.value,
                          "ratio": None, "source": r.source})
    out = pd.DataFrame(table + extra, columns=["metric", "ours", "published", "ratio", "source"])
    for c in ("ours", "published", "ratio"):
        out[c] = pd.to_numeric(out[c]).astype(float)
    ok = out.published.notna() & (out.published != 0)
    out.loc[ok, "ratio"] = out.ours[ok] / out.published[ok]
    return out


def _cell(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def _cells(*cells: str) -> str:
    """One Markdown table row; a | inside a cell is escaped."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _verdict(v: str) -> str:
    """How a setup row's verdict reads in the report."""
    if v == papers.NA:
        return "— (nothing to compare)"
    if not v:
        return "same"
    head, why = v.split(": ", 1)
    return f"**{head}:** {why}"


def _setup_table(rows: list[papers.Row]) -> str:
    lines = ["| | the paper | ours | difference |", "|---|---|---|---|"]
    lines += [_cells(aspect, paper, mine, _verdict(v)) for aspect, paper, mine, v in rows]
    return "\n".join(lines)


def _values_table(cmp: pd.DataFrame, with_published: bool) -> str:
    if not with_published:
        lines = ["| metric | ours |", "|---|---|"]
        lines += [_cells(f"`{r.metric}`", _cell(r.ours)) for r in cmp.itertuples()]
        return "\n".join(lines)
    lines = ["| metric | ours | published | ours / published | source |", "|---|---|---|---|---|"]
    lines += [_cells(f"`{r.metric}`", _cell(r.ours), _cell(r.published), _cell(r.ratio, 3), r.source)
              for r in cmp.itertuples()]
    return "\n".join(lines)


def figure_section(fig: papers.Figure, root: Path, out: Path, pub: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """One figure: the setups side by side, the metric names, the plot, our numbers beside the published."""
    from scribe_spark import report
    folder = root / fig.job
    params = tomllib.loads((folder / "params.toml").read_text())
    pub = pub[pub.figure == fig.name]
    mine = ours(fig, folder, params, pub)
    with report.figure(out / f"{fig.name}.png", fig.title, fig.xlabel, fig.ylabel) as ax:
        fig.plot(ax, folder, params, mine, pub)
    cmp = comparison(mine, pub)
    setup = fig.setup(params)
    differs = [r[0] for r in setup if r[3] and r[3] != papers.NA]
    compared = int(cmp.ratio.notna().sum())
    far = cmp[cmp.ratio.notna() & ((cmp.ratio - 1).abs() > 0.10)]
    names = "\n".join(f"- `{usage(fig, m, params)}`: {m.about}" for m in fig.metrics)
    text = [f'<a id="fig-{fig.name}"></a>', "", f"## {fig.name}: {fig.title}", "",
            f"{fig.paper}. Job `{fig.job}` (its tables and parameters: [`../{fig.job}/`](../{fig.job}/)). "
            f"{fig.what}", "", "### Setup: the paper's and ours", "", _setup_table(setup), "",
            f"![{fig.name}]({fig.name}.png)", "", "### Numbers", "", _values_table(cmp, len(pub) > 0), ""]
    if len(pub):
        text += [(f"{len(far)} of the {compared} values compared differ from the published one by more than "
                  "10%." + (f" Setup differences that can explain it: {', '.join(differs)}."
                            if len(far) and differs else "")) if compared else
                 "No published value of this figure is at a point this run measured (see the rows with "
                 "no value of ours).", ""]
    if fig.notes:
        text += [fig.notes, ""]
    if fig.inference is not None and len(pub):
        text += [*fig.inference(folder, params, pub), ""]
    text += ["Metric names (for `--published`):", "", names, ""]
    return "\n".join(text), cmp.assign(figure=fig.name)


def write_report(root: Path, published: pd.DataFrame, published_file: Path | None = None) -> Path:
    """Write DIR/reproduce/ (report.md, plots, compared values) atomically, then DIR/index.html."""
    from scribe_spark import report
    missing = [j for j in papers.JOBS if not (root / j / "params.toml").is_file()]
    if missing:
        raise UsageError(f"{root}: no complete run of {', '.join(missing)}; run ./run.sh reproduce first")
    tmp = root / f".{FOLDER}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        sections, tables = [], []
        for fig in papers.FIGURES:
            text, cmp = figure_section(fig, root, tmp, published)
            sections.append(text)
            tables.append(cmp)
        values = pd.concat(tables, ignore_index=True)
        cols = ["figure", "metric", "ours", "published", "ratio", "source"]
        report.write_csv(values[cols], tmp / "values.csv")
        if published_file is not None:
            shutil.copyfile(published_file, tmp / "published.csv")
        (tmp / "report.md").write_text(_head(root, published, published_file) + "\n\n".join(sections))
        final = root / FOLDER
        folder.publish(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.write_index(root, f"scribe-spark: paper-vs-simulation report ({root.name})")
    return final


def _head(root: Path, published: pd.DataFrame, published_file: Path | None) -> str:
    confs = []
    for job in papers.JOBS:   # params.toml's first line: "# resolved parameters of JOB (conf: PATH)"
        first = (root / job / "params.toml").read_text().splitlines()[0]
        m = re.search(r"\(conf: (.*)\)$", first)
        confs.append(f"`{job}` ({m.group(1) if m else 'conf unknown'})")
    contents = "\n".join(f"- [{f.name}](#fig-{f.name}): {f.title}" for f in papers.FIGURES)
    pub = (f"Published values: {len(published)} rows from `{published_file}` (copied to `published.csv`), "
           f"from {published.source.nunique()} source(s). Each is shown beside our value with the ratio "
           "ours / published, and marked on the plot (one marker shape per source)."
           if published_file is not None else
           "No published values were given (`--published FILE.csv` adds them; the repository ships none).")
    return (f"# Paper-vs-simulation report\n\nWritten {datetime.now():%Y-%m-%d %H:%M} from the runs in "
            f"`{root}`: {', '.join(confs)}. All values below are measured by this run; none is tuned toward "
            f"a published figure.\n\n{pub} Every value of this report is also in `values.csv`.\n\n"
            "**Metric names.** A value is named `metric`, `metric[variant]`, `metric@x` or "
            "`metric[variant]@x`: the variant picks a series (a popularity model and chain rule, a routing "
            "mode, a second join phase, a scheme), x a point on the figure's x axis (a number such as the "
            "overlay size, or a category such as a phase). A published-values file names the figure in "
            "its `figure` column and one of these names in its `metric` column; each figure lists its "
            "names at its end, and `./run.sh reproduce --metrics` prints them all.\n\n"
            "**Setup tables** put the paper's setup (as the docs' model page describes it) beside this run's "
            "and name every difference.\n\n## Figures\n\n" + contents + "\n\n")


def catalog() -> str:
    """Every figure with its job and metric names (for writing a published-values file)."""
    lines = []
    for fig in papers.FIGURES:
        lines.append(f"{fig.name}  ({fig.job}; {fig.title})")
        for m in fig.metrics:
            lines.append(f"    {usage(fig, m, None):<48} {m.about}")
    return "\n".join(lines)


# ------------------------------------------------------------------ the command

def _run_job(cmd: list[str], again: str) -> int:
    """Run one job through run.sh; its stop line names `again`, which continues the whole reproduce.

    Ctrl-C reaches run.sh too, which stops the job in one line; this process waits for that (a
    SIGTERM meant for it alone is passed on) and returns the job's exit code.
    """
    child = subprocess.Popen(cmd, env={**os.environ, "SCRIBE_RESUME_WITH": again})

    def pass_on(signum: int, frame) -> None:
        if signum == signal.SIGTERM:
            child.send_signal(signum)
    handlers = {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def main(argv: list[str]) -> int:
    """Check everything, run the jobs, write the report; return the exit code."""
    try:
        if "--metrics" in argv:
            parse_args(argv)
            print(catalog())
            return 0
        s = plan(argv)
        if s.master is not None:
            environment.reach_master(s.master)
    except (config.ConfigError, UsageError, PublishedError) as e:
        print(f"reproduce: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except environment.MasterError as e:
        print(f"reproduce: error: {e}", file=sys.stderr)
        return EXIT_CLUSTER_CONFIG if e.unconfigured else EXIT_MASTER
    runner = project_root() / "run.sh"
    print(f"reproduce: {len(papers.JOBS)} jobs into {s.out}: "
          + ", ".join(f"{j} ({s.confs[j]})" for j in papers.JOBS), flush=True)
    for i, job in enumerate(papers.JOBS, 1):
        print(f"== reproduce {i}/{len(papers.JOBS)}: {job}", flush=True)
        cmd = [str(runner), job, "--conf", str(s.confs[job]), "--out", str(s.out)]
        if s.resume:   # a job already complete is kept, an unfinished one continues
            cmd.append("--resume")
        if s.master:
            cmd += ["--master", s.master]
        if s.pdf:
            cmd.append("--pdf")
        again = ["./run.sh", "reproduce", *[a for a in argv if a != "--resume"]]
        again = shlex.join(again + ([] if s.out_given else ["--out", str(s.out)]) + ["--resume"])
        rc = _run_job(cmd, again)
        if rc in (EXIT_BAD_INPUT, EXIT_MASTER, EXIT_CLUSTER_CONFIG):   # refused before it started
            print(f"reproduce: error: {job} did not start (exit {rc}); the jobs before it are kept in "
                  f"{s.out}; "
                  f"continue with: {again}", file=sys.stderr)
        if rc != 0:   # otherwise the job's own line said why and how to continue
            return rc
    from scribe_spark import report  # matplotlib: only once the jobs are done
    with report.vector_copies(s.pdf):
        final = write_report(s.out, s.published, s.published_file)
    print(f"reproduce: report in {final / 'report.md'}; every run on one page: {s.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("reproduce: stopped by Ctrl-C; the jobs completed so far are kept", file=sys.stderr)
        sys.exit(130)
