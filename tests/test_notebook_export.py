"""A notebook run headless keeps its charts outside a kernel and stays small.

The quickstart is executed as nbclient executes it (nbconvert --execute, nbval: every widget's
last state is kept in the saved notebook, closed or not), saved, and converted to HTML the way
nbconvert, nbviewer and GitHub would show it: every chart is there as plotly's own HTML, and
no copy of plotly.js rides in the widget state (a run of the quickstart saved at 10.9 MB with
plotly's FigureWidget).
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "notebooks" / "01-quickstart.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """notebook 01 executed headless in this environment's kernel, saved, and its HTML export."""
    work = tmp_path_factory.mktemp("nb")
    nb = nbformat.read(QUICKSTART, as_version=4)
    # cwd outside the repository: the kernel imports the installed perfkit, not the source folder
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}},
                            store_widget_state=True).execute()
    saved = work / "01-quickstart.ipynb"
    nbformat.write(nb, saved)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nbformat.read(saved, as_version=4))
    return saved, nbformat.read(saved, as_version=4), html


def _figure_outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if PLOTLY in o.get("data", {})]


def test_a_saved_quickstart_is_small_and_carries_no_plotly_js(executed):
    saved, nb, _ = executed
    size = saved.stat().st_size
    # PNGs included (each chart's copy for GitHub): the bound is on the whole file
    png = sum(len(o["data"].get("image/png", "")) for o in _figure_outputs(nb))
    assert size < 1_000_000, f"{saved.name} is {size:,} bytes ({png:,} of PNG)"
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert states, "the panel's widgets are kept"
    biggest = max(states.items(), key=lambda kv: len(json.dumps(kv[1])))
    assert len(json.dumps(biggest[1])) < 100_000, (biggest[0], biggest[1].get("model_name"))
    # the live figures were perfkit's own widget, emptied when their static copy replaced them
    live = [s["state"] for s in states.values() if "figure" in s["state"] and "plotly_js" in s["state"]]
    assert len(live) >= 2 and all(s["figure"] == "{}" for s in live)
    libs = [s["state"] for s in states.values() if "source" in s["state"]]
    assert libs and all(s["source"] == "" for s in libs)


def test_every_chart_of_the_quickstart_is_in_its_html_export(executed):
    _, nb, html = executed
    figures = _figure_outputs(nb)
    # the panel's run ends in a static figure inside its Output widget (widget state); the
    # dashboard's (its live cell's output replaced), the loaded run's, the histogram's
    assert len(figures) >= 3
    for out in figures:
        data = out["data"]
        assert "Plotly.newPlot" in data["text/html"], data["text/plain"]
        title = data[PLOTLY]["layout"]["title"]["text"]
        assert title.split("<b>")[-1].split("</b>")[0].split(" — ")[0] in html
    assert html.count("Plotly.newPlot(") >= len(figures)
    for title in ("the loaded run", "tcp_lat round trip", "udp_bw, 256 B, 50 kpps, 3 s"):
        assert title in html, title
    # and as PNG, which GitHub shows (kaleido, the notebook extra's): every chart shown as a
    # cell's result; the panel's own chart sits in an Output widget's state, which GitHub never shows
    cells = [o for o in figures if o.get("output_type") in ("display_data", "execute_result")]
    assert all("image/png" in o["data"] for o in cells), [o["data"]["text/plain"] for o in cells
                                                          if "image/png" not in o["data"]]
    assert sum(1 for o in cells if "image/png" in o["data"]) >= 3
    assert all(base64.b64decode(o["data"]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n" for o in cells)


def test_live_figures_share_one_plotly_js_and_leave_none_behind():
    from perfkit.ui import charts, livefig
    a = livefig.LiveFigure(charts.empty_figure("a"))
    b = livefig.LiveFigure(charts.empty_figure("b"))
    assert a.plotly_js == b.plotly_js and livefig.live_count() == 2
    lib = livefig._shared
    assert len(lib.source) > 1_000_000 and len(a._esm) < 5_000   # the widget itself is small
    with a.batch_update():
        a.data[0].x, a.data[0].y = [0.0, 1.0], [5.0, 6.0]
    assert json.loads(a.figure)["data"][0]["y"] == [5.0, 6.0]
    a.close()
    assert lib.source and livefig.live_count() == 1          # b still draws
    b.close()
    b.close()                                                 # twice is harmless
    assert lib.source == "" and livefig.live_count() == 0 and b.figure == "{}"
    c = livefig.LiveFigure(charts.empty_figure("c"))          # a new live period sends it again
    assert livefig._shared is not lib and len(livefig._shared.source) > 1_000_000
    c.close()
