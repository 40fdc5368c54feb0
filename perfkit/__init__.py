"""perfkit: network performance and stress testing with native engines, from Jupyter,
the command line or plain Python.

    import perfkit
    run = perfkit.run(perfkit.LocalTest("udp_bw", size=64, duration="5s"))
    run.frame      # per-second rows (polars)
    run.summary    # whole-run figures
"""
from perfkit.engines import engines
from perfkit.comparison import Comparison, LadderComparison, compare
from perfkit.errors import EngineError
from perfkit.run import Run, load, set_report_writer
from perfkit.cluster import Cluster
from perfkit.remote import serve, test
from perfkit.ratesearch import SearchResult, parse_criterion, search
from perfkit.ladder import Ladder, ladder   # user ladders: one HTTP load per user count
from perfkit.rfc2544 import Rfc2544Result, rfc2544   # RFC 2544's four tests at each frame size
from perfkit.kinds import SPECS
from perfkit.stats import COUNTERS, Histogram
from perfkit.store import Store
from perfkit.units import Rate, parse_duration, parse_rate, parse_size
from perfkit.version import __version__

globals().update(SPECS)   # every spec of every kind (perfkit.kinds): LocalTest, RemoteTest, ..., DpdkHttpClient


def _write_report(obj, path, title: str | None = None) -> str:
    """run.report() and compare(...).report(): the UI layer renders them (perfkit.ui.html)."""
    from perfkit.ui.html import html_report  # the UI loads with the first report, not with perfkit
    return html_report(obj, path, title=title)


set_report_writer(_write_report)


def run(spec, engine: str | None = None, interval: float = 1.0, subscribers=(), cluster=None, thresholds=(),
        watch=None) -> Run:
    """Run spec to the end and return the finished Run (cluster: split over its engines, perfkit.Cluster;
    thresholds: pass/fail conditions such as "p99<200ms", run.passed and run.thresholds; watch:
    {name: pid or [pids]}, processes whose CPU the rows record, e.g. a server)."""
    return Run(spec, engine=engine, interval=interval, subscribers=subscribers, cluster=cluster,
               thresholds=thresholds, watch=watch).run()


__all__ = ["COUNTERS", "Cluster", "Comparison", "LadderComparison", "EngineError", "Histogram", "Rate", "Run", "SearchResult", "Store", "compare",
           "engines", "load", "Ladder", "ladder", "Rfc2544Result", "rfc2544", "parse_criterion", "parse_duration", "parse_rate", "parse_size", "run", "search", "serve",
           "test", "__version__", *SPECS]
