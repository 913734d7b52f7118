"""Session-time laws and traces of the churn workloads, against closed forms and a renewal simulation."""
import math

import numpy as np
import pytest

from scribe_spark.sessions import SessionLaw, read_trace

LAWS = [SessionLaw("exponential", 600.0), SessionLaw("weibull", 600.0, 0.6),
        SessionLaw("weibull", 600.0, 2.5), SessionLaw("pareto", 600.0, 3.0)]


@pytest.mark.parametrize("law", LAWS, ids=lambda x: f"{x.kind}-{x.shape}")
def test_sessions_have_the_mean_asked_for(law):
    x = law.sessions(np.random.default_rng(1), 400_000)
    assert x.mean() == pytest.approx(law.mean_s, rel=0.02)
    if law.kind == "pareto":
        assert x.min() >= law.scale


@pytest.mark.parametrize("law", LAWS, ids=lambda x: f"{x.kind}-{x.shape}")
def test_the_median_is_the_draws_median(law):
    x = law.sessions(np.random.default_rng(2), 400_000)
    assert np.median(x) == pytest.approx(law.median, rel=0.01)
    assert law.median < law.mean_s   # the four laws here are all skewed to the right


def _renewal_residuals(law, rng, points=20_000):
    """What remains of the session under way at random moments of one long run of back-to-back sessions."""
    sessions = law.sessions(rng, 2_000_000)
    ends = np.cumsum(sessions)
    at = rng.uniform(ends[1000], ends[-1000], points)
    return ends[np.searchsorted(ends, at)] - at


@pytest.mark.parametrize("law", LAWS, ids=lambda x: f"{x.kind}-{x.shape}")
def test_residuals_are_what_a_renewal_process_leaves(law):
    rng = np.random.default_rng(2)
    drawn, seen = law.residuals(rng, 200_000), _renewal_residuals(law, rng)
    for q in (0.1, 0.5, 0.9):
        assert np.quantile(drawn, q) == pytest.approx(np.quantile(seen, q), rel=0.06)


def test_residual_mean_is_the_equilibrium_mean():
    # E[residual] = E[X^2] / (2 E[X]): Weibull lambda^2 Gamma(1 + 2/k) / (2 mean),
    # Pareto alpha x_m^2 / ((alpha - 2) 2 mean)
    w, p = SessionLaw("weibull", 600.0, 0.6), SessionLaw("pareto", 600.0, 3.0)
    rng = np.random.default_rng(3)
    assert w.residuals(rng, 400_000).mean() == pytest.approx(
        w.scale ** 2 * math.gamma(1 + 2 / 0.6) / 1200.0, rel=0.03)
    assert p.residuals(rng, 400_000).mean() == pytest.approx(3.0 * p.scale ** 2 / (1.0 * 1200.0), rel=0.05)


@pytest.mark.parametrize("law", LAWS[1:], ids=lambda x: f"{x.kind}-{x.shape}")
def test_arrivals_and_residuals_keep_the_size_steady(law):
    """Little's law from the start: the first members' residual sessions keep the size where it is
    (whole sessions would not: a long- or short-tailed law would make it dip or swell at first)."""
    rng = np.random.default_rng(4)
    nodes, span = 20_000, 5.0                    # short steps: arrivals counted at a step's end add little
    ends, sizes = law.residuals(rng, nodes), []
    for e in range(360):
        until = (e + 1) * span
        arriving = until + law.sessions(rng, rng.poisson(nodes * span / law.mean_s))
        ends = np.concatenate([ends[ends > until], arriving])
        sizes.append(len(ends))
    assert np.mean(sizes[:120]) == pytest.approx(20_000, rel=0.015)   # the first mean session
    assert np.mean(sizes) == pytest.approx(20_000, rel=0.015)


def test_laws_refuse_shapes_without_a_finite_mean():
    with pytest.raises(ValueError, match="shape > 1"):
        SessionLaw("pareto", 600.0, 1.0)
    with pytest.raises(ValueError, match="must be one of"):
        SessionLaw("lognormal", 600.0)


def _trace(tmp_path, text):
    f = tmp_path / "trace.csv"
    f.write_text(text)
    return f


@pytest.mark.parametrize("text, message", [
    ("id,start,end\n1,0,5\n", "header must be node,start_s,end_s"),
    ("node,start_s,end_s\n", "no sessions"),
    ("node,start_s,end_s\n1,0,x\n", "line 2: end_s must be a finite number"),
    ("node,start_s,end_s\n1,0,5\n\n2,nan,5\n", "line 4: start_s must be a finite number"),   # blank line 3
    ("node,start_s,end_s\n1,5,5\n", "line 2: a session must end after it starts"),
    ("node,start_s,end_s\n1,0,50\n2,0,9\n1,40,90\n", "line 4: node '1' has overlapping sessions"),
])
def test_bad_traces_are_refused_with_the_row(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_trace(_trace(tmp_path, text))


def test_a_trace_is_parsed_once_while_unchanged(tmp_path, monkeypatch):
    """The check, the ring's size and the run read a trace: it is parsed once while the file is unchanged,
    each caller gets a copy of its own, and a changed file is read again."""
    from scribe_spark import sessions
    parses = []
    parse = sessions._parse_trace
    monkeypatch.setattr(sessions, "_parse_trace", lambda path: parses.append(path) or parse(path))
    f = _trace(tmp_path, "node,start_s,end_s\na,0,10\nb,0,20\n")
    first = read_trace(f)
    first.loc[:, "end_s"] = -1.0            # a caller's copy: the next reading does not see it
    assert read_trace(f).end_s.tolist() == [10.0, 20.0] and len(parses) == 1
    f.write_text("node,start_s,end_s\na,0,10\nb,0,20\nc,5,30\n")   # changed: read again
    assert len(read_trace(f)) == 3 and len(parses) == 2
