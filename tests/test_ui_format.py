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
