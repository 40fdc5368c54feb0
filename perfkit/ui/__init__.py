"""perfkit in Jupyter: a control panel generated from a spec, and live charts of a run.

    import perfkit.ui
    panel = perfkit.ui.Panel(duration="5s")   # pick a test, press Start, watch the charts
    panel.run                                 # the Run afterwards (panel.wait() to block)

    run = perfkit.Run(perfkit.LocalTest("udp_bw", duration="5s"))
    dash = perfkit.ui.show(run)               # starts the run, shows the live dashboard
    dash.wait()                               # the chart is now a static figure

Needs the notebook extra (ipywidgets, plotly with anywidget, ipykernel >= 7.1).
"""
from perfkit.ui.charts import histogram_figure, run_figure
from perfkit.ui.dashboard import Dashboard, show
from perfkit.ui.panel import Panel, summary_line

__all__ = ["Dashboard", "Panel", "histogram_figure", "run_figure", "show", "summary_line"]
