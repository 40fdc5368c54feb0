"""perfkit in Jupyter: a control panel generated from a spec, and live charts of a run.

    import perfkit.ui
    panel = perfkit.ui.Panel(duration="5s")   # pick a test, press Start, watch the charts
    panel.run                                 # the Run afterwards (panel.wait() to block)
    perfkit.ui.Panel("DpdkFlows")             # any spec: HttpLoad, HttpServe, RemoteTest, DpdkReflect...
    perfkit.ui.Launcher()                     # every spec's panel, a tab each, and the lab's
    perfkit.ui.LabPanel(delay="10ms")         # perfkit lab up / impair / down / status (root)
    p = perfkit.ui.Panel(rate="200kpps").set(task="search", criterion="pdr:0.1%")   # a rate search
    p = perfkit.ui.Panel("RemoteTest").set(task="sweep", sweep="msg_size:64:16K:*4")  # qperf's --oo
    p.frame                                   # afterwards: the trials / the points (polars)

    run = perfkit.Run(perfkit.LocalTest("udp_bw", duration="5s"))
    dash = perfkit.ui.show(run)               # starts the run, shows the live dashboard
    dash.wait()                               # the chart is now a static figure

    perfkit.ui.StoreBrowser("runs")           # filter stored runs, pick some, compare them
    perfkit.ui.html_report(run, "run.html")   # self-contained HTML (also run.report(path))

Needs the notebook extra (ipywidgets, plotly with anywidget, ipykernel >= 7.1).
"""
from perfkit.ui.charts import histogram_figure, run_figure
from perfkit.ui.dashboard import Dashboard, show
from perfkit.ui.html import html_report
from perfkit.ui.lab import LabPanel
from perfkit.ui.launcher import Launcher
from perfkit.ui.panel import Panel, summary_line
from perfkit.ui.points import PointsChart, search_figure, sweep_figure
from perfkit.ui.store import StoreBrowser

__all__ = ["Dashboard", "LabPanel", "Launcher", "Panel", "PointsChart", "StoreBrowser", "histogram_figure",
           "html_report", "run_figure", "search_figure", "show", "summary_line", "sweep_figure"]
