"""`./run.sh reproduce`: published values checked before anything runs, the report, the one-page index."""
import math
import tomllib

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from scribe_spark import cli, papers, report, reproduce
from tests.helpers import ROOT

matplotlib.use("Agg")
TINY = ROOT / "conf" / "tiny"

BAD = [
    ("pastry_hopz,mean_hops@300,2,paper", "unknown figure 'pastry_hopz'"),
    ("pastry_hops,mean_hop@300,2,paper", "figure 'pastry_hops' has no metric 'mean_hop@300'"),
    ("pastry_hops,mean_hops,2,paper", "pastry_hops mean_hops: needs @nodes"),
    ("pastry_hops,max_hops[proximity]@300,2,paper", "this metric has no variant"),
    ("pastry_relative_distance,relative_distance[bogus]@300,1,paper",
     "mode must be one of proximity, random"),
    ("pastry_failures,mean_hops@during,3,paper", "phase must be one of before, after_failure, after_repair"),
    ("pastry_failures,repair_rpcs_per_failed_node@before,3,paper", "this metric has no x"),
    ("tno_latency_vs_rate,mean_latency_ms[geographic/etree]@fast,1,paper", "rate must be a finite number"),
    ("tno_latency_vs_rate,mean_latency_ms[geographic/etree]@nan,1,paper", "rate must be a finite number"),
    ("tno_latency_vs_rate,mean_latency_ms[geographic/literal]@300,1,paper", "model/chains must be one of"),
    ("pastry_hops,mean_hops@300,many,paper", "value 'many' of pastry_hops mean_hops@300 is not a finite"),
    ("pastry_hops,mean_hops@300,inf,paper", "value 'inf' of pastry_hops mean_hops@300 is not a finite"),
    ("pastry_hops,mean_hops@300,2,", "the source of pastry_hops mean_hops@300 is empty"),
]


@pytest.mark.parametrize("row, reason", BAD, ids=[r.split(",")[1] for r, _ in BAD])
def test_a_bad_published_value_stops_reproduce_before_anything_runs(tmp_path, capsys, row, reason):
    published = tmp_path / "published.csv"
    published.write_text("figure,metric,value,source\npastry_hops,mean_hops@300,2.0,paper\n" + row + "\n")
    out = tmp_path / "out"
    assert reproduce.main(["--out", str(out), "--confs", str(TINY), "--published", str(published)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce: error: --published ") and "line 3" in err[0], err
    assert reason in err[0], err
    assert not out.exists()


def test_reproduce_checks_every_job_and_the_file_before_it_starts(tmp_path, capsys):
    confs = tmp_path / "confs"
    confs.mkdir()
    (confs / "pastry_joins.toml").write_text("nodes = 100\ninitial = 100\n")
    (tmp_path / "no-header.csv").write_text("figure,metric,value\n")
    plane = tmp_path / "plane"
    plane.mkdir()
    (plane / "scribe_small_groups.toml").write_text('proximity = "plane"\nnodes = 300\ntopics = 20\n')
    cases = [(["--confs", str(confs)], f"pastry_joins ({confs / 'pastry_joins.toml'}): key 'initial'"),
             (["--confs", str(plane)], "scribe_small_groups (" + str(plane / "scribe_small_groups.toml")
              + "): key 'proximity': must be 'transit-stub' here"),
             (["--confs", str(TINY), "--published", str(tmp_path / "no-header.csv")],
              "missing column(s) source"),
             (["--confs", str(TINY), "--published", str(tmp_path / "none.csv")], "file not found"),
             (["--confs", str(tmp_path / "nowhere")], f"--confs {tmp_path / 'nowhere'}: not a folder"),
             (["--resume"], "--resume needs --out")]
    for args, reason in cases:
        out = [] if "--resume" in args else ["--out", str(tmp_path / "out")]
        assert reproduce.main(args + out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and reason in err[0], (args, err)
    assert not (tmp_path / "out").exists()
    base = ["--confs", str(TINY), "--out", str(tmp_path / "out")]
    assert reproduce.plan(base + ["--pdf"]).pdf and not reproduce.plan(base).pdf


@pytest.mark.parametrize("pdf", [True, False])
def test_reproduce_hands_pdf_to_every_job_and_draws_its_report_with_it(tmp_path, monkeypatch, capsys, pdf):
    """--pdf reaches each job's command and the report's plots, and is off again afterwards."""
    cmds, during = [], []

    def run(cmd, again):
        cmds.append(cmd)
        return 0

    def fake_report(root, published, published_file=None):
        during.append(report._vector)
        return root
    monkeypatch.setattr(reproduce, "_run_job", run)
    monkeypatch.setattr(reproduce, "write_report", fake_report)
    flag = ["--pdf"] if pdf else []
    assert reproduce.main(["--confs", str(TINY), "--out", str(tmp_path / "out"), *flag]) == 0
    capsys.readouterr()
    assert [c[1] for c in cmds] == list(papers.JOBS)
    assert all(("--pdf" in c) == pdf for c in cmds)
    assert during == [pdf] and report._vector is False


def test_every_metric_of_every_figure_can_be_published(tmp_path):
    """Each metric of every figure, with a variant and an x the tiny runs measure, reads back."""
    params = {job: reproduce.as_dict(cli.plan(job, ["--conf", str(reproduce.conf_for(job, TINY))]).params)
              for job in papers.JOBS}
    rows = []
    for fig in papers.FIGURES:
        dims = fig.dims(params[fig.job])
        for m in fig.metrics:
            name = m.name + (f"[{dims[m.variant][0]}]" if m.variant else "")
            name += (f"@{dims[m.x][0]}" if m.x in dims else "@1") if m.x else ""
            rows.append(f"{fig.name},{name},1.5,catalog")
    published = tmp_path / "all.csv"
    published.write_text("figure,metric,value,source\n" + "\n".join(rows) + "\n")
    got = reproduce.read_published(published, params)
    assert list(got.figure + " " + got.key) == [r.split(",")[0] + " " + r.split(",")[1] for r in rows]
    assert "relative_distance[mode]@nodes" in reproduce.catalog()


@pytest.mark.slow
def test_report_puts_published_values_beside_ours_and_one_page_shows_the_run(tiny, tmp_path):
    root = tiny.many(list(papers.JOBS))[papers.JOBS[0]].parent
    params = {job: tomllib.loads((root / job / "params.toml").read_text()) for job in papers.JOBS}
    hops = pd.read_csv(root / "pastry_hops" / "hops.csv")
    n, mean = int(hops.nodes.iloc[-1]), float(hops.mean_hops.iloc[-1])
    links = pd.read_csv(root / "scribe_multicast" / "link_stress.csv").set_index("scheme")
    ip_max = float(links.at["ip_multicast", "max"])
    published = tmp_path / "published.csv"
    published.write_text("figure,metric,value,source\n"
                         f"pastry_hops,mean_hops@{n},{2 * mean!r},paper A\n"
                         "pastry_hops,mean_hops@123456,4.0,paper A\n"   # a size this run did not measure
                         f"scribe_link_stress,max[ip_multicast],{ip_max / 4!r},paper B\n")
    final = reproduce.write_report(root, reproduce.read_published(published, params), published)

    values = pd.read_csv(final / "values.csv")
    assert set(values.figure) == set(papers.BY_NAME)
    v = values.set_index(["figure", "metric"])
    assert v.at[("pastry_hops", f"mean_hops@{n}"), "ours"] == pytest.approx(mean)
    assert v.at[("pastry_hops", f"mean_hops@{n}"), "ratio"] == pytest.approx(0.5)
    assert math.isnan(v.at[("pastry_hops", "mean_hops@123456"), "ours"])
    assert v.at[("pastry_hops", "mean_hops@123456"), "published"] == 4.0
    assert v.at[("scribe_link_stress", "max[ip_multicast]"), "ratio"] == pytest.approx(4.0)
    assert v.ratio.notna().sum() == 2   # no value of ours is compared with anything else
    md = (final / "report.md").read_text()
    for fig in papers.FIGURES:
        assert f"## {fig.name}: " in md and (final / f"{fig.name}.png").stat().st_size > 0
    assert f"| `mean_hops@{n}` | " in md and "| paper A |" in md
    assert "**differs:** another range of sizes" in md and "**may differ:** " in md
    assert (final / "published.csv").read_text() == published.read_text()

    # every figure reads every metric it declares, and its plot marks one published point per metric
    for fig in papers.FIGURES:
        mine = reproduce.ours(fig, root / fig.job, params[fig.job])
        assert set(mine.metric) == {m.name for m in fig.metrics}, fig.name
        first = mine.drop_duplicates("metric")
        pub = first.assign(value=first.value * 2 + 1, source="paper C")
        _, ax = plt.subplots()
        marks, scatter = [], ax.scatter   # papers.mark draws each published point with one scatter call
        ax.scatter = lambda *a, **k: marks.append(a) or scatter(*a, **k)
        fig.plot(ax, root / fig.job, params[fig.job], mine, pub)
        plt.close("all")
        assert len(marks) == len(pub), fig.name

    page = (root / "index.html").read_text()
    for fig in papers.FIGURES:
        assert f'src="reproduce/{fig.name}.png"' in page
    for job in papers.JOBS:
        assert f'<section id="{job}">' in page
        for png in (root / job).glob("*.png"):
            assert f'src="{job}/{png.name}"' in page


def test_published_points_are_marked_on_the_plot(tmp_path):
    run = tmp_path / "pastry_hops"   # a job's folder: its tables are read by its declarations
    run.mkdir()
    (run / "hops.csv").write_text("nodes,lookups,mean_hops,max_hops,log_2b_n\n"
                                  "1000,10,2.5,4,2.49\n10000,10,3.3,5,3.32\n")
    fig = papers.BY_NAME["pastry_hops"]
    mine = reproduce.ours(fig, run, {})
    pub = pd.DataFrame({"metric": ["mean_hops", "max_hops"], "variant": ["", ""], "x": ["1000", "10000"],
                        "value": [2.0, 6.0], "source": ["paper A", "paper A"]})
    _, ax = plt.subplots()
    fig.plot(ax, run, {}, mine, pub)
    points = {tuple(p) for c in ax.collections for p in c.get_offsets()}
    plt.close("all")
    assert points == {(1000.0, 2.0), (10000.0, 6.0)}


def test_markdown_becomes_html_with_links_into_the_run_folder():
    text = ("# Title\n\nSome `code` and **bold**, [a table](t.csv).\n\n| a | b \\| c |\n|---|---|\n"
            "| 1 | x \\| y |\n\n- one\n- two\n\n![plot](p.png)\n<a id=\"k\"></a>\n")
    got = report.markdown_html(text, "job/")
    assert "<h1>Title</h1>" in got and "<code>code</code>" in got and "<strong>bold</strong>" in got
    assert '<a href="job/t.csv">a table</a>' in got and '<img alt="plot" src="job/p.png">' in got
    assert "<th>b | c</th>" in got and "<td>x | y</td>" in got and "<ul><li>one</li><li>two</li></ul>" in got
    assert '<a id="k"></a>' in got


def test_the_page_escapes_what_the_files_hold():
    text = "<script>alert(1)</script> & \"q\"\n\n| a |\n|---|\n| <b> |\n\n![x\"y](p&q.png)\n"
    got = report.markdown_html(text, "a&b/")
    assert "<script>" not in got and "&lt;script&gt;" in got and "<td>&lt;b&gt;</td>" in got
    assert 'src="a&amp;b/p&amp;q.png"' in got and 'alt="x&quot;y"' in got


def test_a_cdf_of_many_values_draws_few_steps_on_the_exact_curve():
    fig, ax = plt.subplots()
    v = np.random.default_rng(0).exponential(size=123_457)
    report.cdf(ax, v)
    report.cdf(ax, v[:50])
    many, few = (line.get_data() for line in ax.get_lines())
    plt.close(fig)
    assert len(many[0]) <= report.CDF_POINTS and len(few[0]) == 50
    ranks = np.searchsorted(np.sort(v), many[0], side="right")      # exact ECDF at each drawn value
    assert np.array_equal(ranks / len(v), many[1]) and many[1][-1] == 1.0
    assert np.array_equal(few[1], np.arange(1, 51) / 50)


def test_a_published_peak_gives_the_service_time_it_implies_as_an_inference(tmp_path):
    from scribe_spark.experiments.outputs import OUTPUTS
    run = tmp_path / "tno_sequencer"
    run.mkdir()
    row = {"popularity": "geographic", "chains": "literal", "topics_per_client": 10, "service_ms": 0.05,
           "message_ms": 0.01, "server_cores": 4, "predicted_per_s": 20000.0, "bottleneck": "server 1",
           "bottleneck_stages_per_event": 1.0, "bottleneck_messages_per_event": 0.5,
           "saturated_from_rate_per_s": float("nan"), "simulated_peak_per_s": 19000.0}
    table = OUTPUTS["tno_sequencer"]["capacity"]
    pd.DataFrame([row])[table.names].to_csv(run / table.file, index=False)
    pub = pd.DataFrame({"metric": ["peak_per_s"], "variant": ["geographic/literal"], "x": [""],
                        "value": [8000.0], "source": ["paper A"]})
    (line,) = papers.BY_NAME["tno_throughput_vs_rate"].inference(run, {}, pub)
    # (1000 / 8,000 - 0.01 ms x 0.5 messages) / 1 stage per event and core = 0.12 ms
    assert line.startswith("- Inferred, not measured: the published peak of 8000/s for `geographic/literal`")
    assert "implies a service time of 0.12 ms per timestamp stage" in line and "this run used 0.05 ms" in line


def test_a_published_peak_is_marked_on_the_throughput_plot(tmp_path):
    run = tmp_path / "tno_sequencer"
    run.mkdir()
    pd.DataFrame({"popularity": ["geographic"] * 2, "chains": ["literal"] * 2, "sweep": ["rate"] * 2,
                  "rate_per_s": [500.0, 5000.0], "throughput_per_s": [498.0, 4100.0]}).to_csv(
        run / "sequencer.csv", index=False)
    fig = papers.BY_NAME["tno_throughput_vs_rate"]
    mine = pd.DataFrame({"metric": ["throughput_per_s"] * 2, "variant": ["geographic/literal"] * 2,
                         "x": [500.0, 5000.0], "value": [498.0, 4100.0]})
    pub = pd.DataFrame({"metric": ["peak_per_s"], "variant": ["geographic/literal"], "x": [""],
                        "value": [4500.0], "source": ["paper A"]})
    _, ax = plt.subplots()
    fig.plot(ax, run, {}, mine, pub)
    points = {tuple(p) for c in ax.collections for p in c.get_offsets()}
    plt.close("all")
    assert points == {(5000.0, 4500.0)}   # at the right end of the series it belongs to
