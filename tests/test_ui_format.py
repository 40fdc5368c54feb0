"""human(): one formatter for people; finish_status(): a finished line that means something."""
import math

from perfkit.comparison import fmt
from perfkit.units import human


def test_human_si_and_time_switching():
    assert human(196_000_000, "bps") == "196 Mbps"
    assert human(1.96e8, "bps") == "196 Mbps"
    assert human(999_999.5, "pps") == "1 Mpps"          # rounded before the prefix is chosen
    assert human(20_200, "µs") == "20.2 ms"            # the "2.02e+04 µs"
    assert human(999.96, "µs") == "1 ms"
    assert human(12.34, "µs") == "12.3 µs"
    assert human(3_400_000, "us") == "3.4 s"
    assert human(0.5, "%") == "0.5 %"
    assert human(None) == "-" and human(math.nan, "µs") == "-"


def test_comparison_table_uses_it():
    assert fmt("lat_p99_us", 20_200) == "20.2 ms"
    assert fmt("rx_bps", 1.96e8) == "196 M"
    assert fmt("loss_pct", 0.123456) == "0.123"


def test_finish_status_colours():
    from perfkit.ui.form import AMBER, GREEN, RED
    from perfkit.ui.panel import finish_status
    ok = {"test": "http", "tps": 1200.0, "lat_p50_us": 800.0, "lat_p99_us": 20_200.0, "error_rate_pct": 0.0,
          "cpu_pct": 30.0, "duration_s": 12.0}
    text, colour = finish_status(ok, None)
    assert colour == GREEN and text.startswith("■ finished") and "20.2 ms" in text
    text, colour = finish_status({**ok, "error_rate_pct": 2.5}, None)
    assert colour == AMBER and "errors 2.5%" in text
    text, colour = finish_status({**ok, "error_rate_pct": 100.0}, None)
    assert colour == RED and "every request failed" in text
    text, colour = finish_status({**ok, "duration_s": 4.9}, None, stopped_by_user=True, planned_s=12)
    assert text.startswith("■ stopped by you after 4.9 of 12 s: ")
    udp = {"test": "udp_bw", "rx_pps": 0.0, "rx_bps": 0.0, "loss_pct": 100.0, "cpu_pct": 5.0}
    text, colour = finish_status(udp, None)
    assert colour == RED and "nothing received" in text
    text, colour = finish_status({**udp, "rx_pps": 5e5, "rx_bps": 2.5e8, "loss_pct": 0.0}, None)
    assert colour == GREEN and "500 kpps" in text


def test_results_and_live_figures_are_in_human_units():
    from perfkit import HttpLoad
    from perfkit.ui.results import live_figures, progress, results_rows
    http = {"test": "http", "tps": 1234.5, "lat_p50_us": 800.0, "lat_p99_us": 20_200.0, "error_rate_pct": 0.25,
            "cpu_pct": 31.4, "duration_s": 12.0, "vusers": 10, "rx_bps": 1.96e8}
    rows = dict(results_rows(http))
    assert rows["transactions/s"] == "1.23 ktps" and rows["p99"] == "20.2 ms" and rows["p50"] == "800 µs"
    assert rows["errors"] == "0.25 %" and rows["received"] == "196 Mbit/s" and rows["duration"] == "12 s"
    assert "loss" not in rows                                   # a figure the summary lacks is not shown
    spec = HttpLoad(url="http://127.0.0.1:8080/", duration="12s")
    row = {"time_s": 3.0, "http_resp_per_s": 1500.0, "lat_p99_us": 1500.0, "http_err_per_s": 2.0,
           "err_timeout_per_s": 1.0, "sock_current": 10, "cpu_pct": 12.0}
    assert live_figures(spec, row) == [("transactions", "1.5 ktps"), ("p99", "1.5 ms"), ("errors", "3 /s"),
                                       ("open", "10"), ("CPU", "12 %")]
    assert progress(spec, [row], "running") == (0.25, "3.0 / 12 s")
    assert progress(spec, [row], "finished") == (1.0, "3.0 / 12 s")
    assert progress(spec, [row], "finished", stopped=True)[0] == 0.25
