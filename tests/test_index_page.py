"""The run page (index.html) in a real headless browser: a contents sidebar, wide tables that scroll inside
their box, plots at a readable size, and nothing wider than the window."""
import json
import shutil
import subprocess

import pytest

from scribe_spark import report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1280, 900)
# appended to a copy of the page: measures the layout once it is drawn, into the DOM that --dump-dom prints
PROBE = """<script>
window.addEventListener("load", () => {
  const main = document.querySelector("main"), box = document.querySelector("div.table");
  const r = (e) => e.getBoundingClientRect();
  const out = {page: document.documentElement.scrollWidth, window: window.innerWidth,
    main: r(main).right, box: {scroll: box.scrollWidth, client: box.clientWidth, right: r(box).right},
    images: [...document.querySelectorAll("img")].map(i => ({width: r(i).width, right: r(i).right})),
    nav: [...document.querySelectorAll("nav a")].map(a => a.getAttribute("href")),
    targets: [...document.querySelectorAll("[id]")].map(e => e.id)};
  const pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _runs(root):
    """Two result folders: one with a wide table under a second-level heading and a plot, one plain."""
    wide = root / "wide_job"
    wide.mkdir(parents=True)
    header = "| " + " | ".join(f"column_number_{i}" for i in range(40)) + " |"
    rows = ("| " + " | ".join("---" for _ in range(40)) + " |\n| "
            + " | ".join(str(i) for i in range(40)) + " |")
    (wide / "summary.md").write_text(f"# wide_job\n\nA run.\n\n## Details\n\n{header}\n{rows}\n")
    with report.figure(wide / "plot.png", "a plot", "x", "y") as ax:
        ax.plot([1, 2, 3], [3, 1, 2], label="line")
    plain = root / "plain_job"
    plain.mkdir()
    (plain / "summary.md").write_text("# plain_job\n\nNothing wide.\n")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (./run.sh test installs Debian's chromium)")
def test_the_run_page_reads_well_in_a_browser(tmp_path):
    _runs(tmp_path)
    page = report.write_index(tmp_path, "a page")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking", "--disable-component-update",
                          "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                          "--virtual-time-budget=3000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    dom = res.stdout
    start = dom.index('<pre id="probe">') + len('<pre id="probe">')
    m = json.loads(dom[start:dom.index("</pre>", start)].replace("&quot;", '"'))
    assert m["page"] <= m["window"]                            # no sideways scrolling of the page
    assert m["box"]["scroll"] > m["box"]["client"]             # the wide table scrolls inside its box ...
    assert m["box"]["right"] <= m["main"] + 1                  # ... which stays within the column
    (image,) = m["images"]
    assert 600 <= image["width"] and image["right"] <= m["main"] + 1   # the plot is readable and fits
    assert {"#wide_job", "#plain_job", "#wide_job-1"} <= set(m["nav"])  # sections and their headings
    assert all(href[1:] in m["targets"] for href in m["nav"])
    shot = tmp_path / "page.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.read_bytes()[16:24] == WINDOW[0].to_bytes(4, "big") + WINDOW[1].to_bytes(4, "big")
