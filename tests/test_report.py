"""Summary tables: a table's float format never hides a value it cannot show."""
import numpy as np
import pandas as pd

from scribe_spark.report import markdown_table


def test_small_values_keep_their_digits_in_a_table_of_one_decimal():
    table = pd.DataFrame({"service_ms": [0.05, 0.1], "loss": [0.02, 0.0], "latency_ms": [163.34, 457.91],
                          "count": [7, 12]})
    rows = markdown_table(table, ".1f").splitlines()
    assert rows[2] == "| 0.05 | 0.02 | 163.3 | 7 |"
    assert rows[3] == "| 0.1 | 0.0 | 457.9 | 12 |"


def test_a_legend_names_only_the_series_with_data():
    import matplotlib.pyplot as plt

    from scribe_spark.report import legend
    fig, ax = plt.subplots()
    ax.plot([], [], label="no line")
    ax.bar([], [], label="no bars")
    ax.errorbar([], [], yerr=[], label="no error bars")
    ax.plot([1, 2], [3, 4], label="line")
    ax.bar([1], [2], label="bars")
    ax.errorbar([1], [2], yerr=[1], label="error bars")
    legend(ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["line", "bars", "error bars"]
    plt.close(fig)
    fig, ax = plt.subplots()   # a legend the plot placed itself stays
    ax.plot([1, 2], [3, 4], label="line")
    ax.legend(loc="lower right", ncol=2)
    placed = ax.get_legend()
    legend(ax)
    assert ax.get_legend() is placed
    plt.close(fig)


def test_lines_that_coincide_share_one_legend_entry():
    import matplotlib.pyplot as plt

    from scribe_spark.report import legend
    fig, ax = plt.subplots()
    ax.plot([0, 60], [1.0, 1.0], "-o", label="before")
    ax.plot([0, 60], [0.9, 1.0], "-s", label="other")
    ax.plot([0, 60], [1.0, 1.0], "--", label="after")
    ax.step([0, 60], [1.0, 1.0], label="a step drawn differently")
    ax.plot([0, 1], [0.5, 0.5], label="from 0 to 1")
    ax.axhline(0.5, label="across the axes")   # the same points, but its x is in axes units
    outside = legend(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["before\n= after", "other", "a step drawn differently", "from 0 to 1", "across the axes"]
    assert outside is not None
    plt.close(fig)
    fig, ax = plt.subplots()   # three lines drawn on one another: each colour still shows
    colours = [(1.0, 0.0, 0.0), (0.0, 0.6, 0.0), (0.0, 0.0, 1.0)]
    for c, label in zip(colours, "abc"):
        ax.plot([0, 1], [0.5, 0.5], color=c, linewidth=4, label=label)
    ax.set_axis_off()
    legend(ax)
    ax.get_legend().remove()
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].reshape(-1, 3).astype(int)
    for c in colours:
        assert (np.abs(pixels - np.array(c) * 255).max(1) < 8).sum() > 100, c
    plt.close(fig)
    fig, ax = plt.subplots()   # four series in three entries: each series counts, so beside the axes
    for y, label in ((1, "a"), (1, "b"), (2, "c"), (3, "d")):
        ax.plot([0, 1], [y, y], label=label)
    assert legend(ax) is not None and len(ax.get_legend().get_texts()) == 3
    plt.close(fig)


def test_sweep_ticks_are_written_briefly():
    from scribe_spark.report import short_count
    assert [short_count(v) for v in (300, 3000, 2_500_000, 0.5)] == ["300", "3k", "2.5M", "0.5"]


def test_a_sweep_axis_is_ticked_at_its_points_only():
    import matplotlib.pyplot as plt

    from scribe_spark.report import log_x
    fig, ax = plt.subplots()
    ax.plot([1000, 3000, 10000], [1, 2, 3])
    log_x(ax, [1000, 3000, 10000, 3000])
    assert list(ax.get_xticks()) == [1000, 3000, 10000]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1k", "3k", "10k"]
    assert len(ax.xaxis.get_minorticklocs()) == 0   # no unlabelled ticks between the points
    plt.close(fig)


def simulate(params, run):
    """This module as a stand-in experiment: no Spark, the declared tables empty ..."""
    from tests.helpers import empty_outcome
    return empty_outcome("pastry_hops")


def report(outcome, params, run) -> None:
    """... and one plot."""
    from scribe_spark import report
    with report.figure(run.path("p.png"), "t", "x", "y") as ax:
        ax.plot([1, 2], [3, 4], label="line")


def test_pdf_copies_are_written_beside_the_pngs_only_when_asked(tmp_path, monkeypatch, capsys):
    import dataclasses

    from scribe_spark import cli, report
    from scribe_spark.cli.args import project_root
    from scribe_spark.experiments import registry
    job = dataclasses.replace(registry.JOBS["pastry_hops"], module="tests.test_report")
    monkeypatch.setitem(registry.JOBS, "pastry_hops", job)
    conf = ["--conf", str(project_root() / "conf/tiny/pastry_hops.toml")]
    assert cli.main("pastry_hops", [*conf, "--out", str(tmp_path / "a"), "--pdf"]) == 0
    assert cli.main("pastry_hops", [*conf, "--out", str(tmp_path / "b")]) == 0
    assert {f.name for f in (tmp_path / "a" / "pastry_hops").glob("p.*")} == {"p.png", "p.pdf"}
    assert {f.name for f in (tmp_path / "b" / "pastry_hops").glob("p.*")} == {"p.png"}
    pdf = (tmp_path / "a" / "pastry_hops" / "p.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"CreationDate" not in pdf   # the same figure, the same bytes
    with report.figure(tmp_path / "after.png", "t", "x", "y") as ax:   # --pdf ended with its job
        ax.plot([1, 2], [3, 4])
    assert not (tmp_path / "after.pdf").exists()
    capsys.readouterr()
    args = [*conf, "--out", str(tmp_path / "b"), "--resume", "--pdf"]
    assert cli.main("pastry_hops", args) == 0   # complete, drawn without --pdf: it says how to get PDFs
    assert "run it again without --resume to get PDFs" in capsys.readouterr().out
