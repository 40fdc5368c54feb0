"""perfkit.stats: the counter schema (derived from the C X-macro list), the
log-linear latency histogram, and how counters become rows and summaries."""
import array
import bisect
import math
import pathlib
import random
import re

import pytest

from perfkit import _counters, stats
from perfkit.stats import (COUNTER_NAMES, COUNTERS, DERIVED, INDEX, Histogram, latency_fields,
                           loss_pct, make_row, merge_counters, row_schema, summarize)

COUNTERS_H = pathlib.Path(__file__).resolve().parents[1] / "native/include/perfkit/counters.h"
N = len(COUNTERS)


def parse_counters_h():
    """[(name, kind, unit, group, label)] read straight from the X-macro list in the header."""
    text = COUNTERS_H.read_text()
    start = text.index("#define PK_COUNTERS(X)")
    body = []
    for line in text[start:].splitlines():
        body.append(line)
        if not line.rstrip().endswith("\\"):
            break
    macro = re.sub(r"/\*.*?\*/", "", "\n".join(body), flags=re.S)
    return re.findall(r'X\(\s*(\w+)\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*\)', macro)


def block(**values):
    """A counter block (one worker) with the named counters set, others 0."""
    b = [0] * N
    for name, v in values.items():
        b[INDEX[name]] = v
    return b


# =================================================================== schema
def test_counters_match_the_c_header():
    from_header = parse_counters_h()
    assert len(from_header) >= 40  # the parse found the list, not a fragment
    assert [c.name for c in COUNTERS] == [h[0] for h in from_header]
    assert [c.kind for c in COUNTERS] == [h[1].lower() for h in from_header]
    assert [c.unit for c in COUNTERS] == [h[2] for h in from_header]
    assert [c.group for c in COUNTERS] == [h[3] for h in from_header]
    assert [c.label for c in COUNTERS] == [h[4] for h in from_header]


def test_counter_table_is_where_stats_gets_it():
    assert [tuple(vars(c).values()) for c in COUNTERS] == [tuple(t) for t in _counters.counter_table()]


def test_counters_cover_what_dperf_and_udp_flow_tests_need():
    must = {"pkts_tx", "pkts_rx", "bytes_tx", "bytes_rx", "drop_tx", "arp_rx", "icmp_rx", "other_rx",
            "bad_rx", "syn_tx", "syn_rx", "fin_tx", "fin_rx", "rst_tx", "rst_rx", "retrans_syn",
            "retrans_fin", "retrans_ack", "retrans_push", "tcp_drop", "sock_open", "sock_close",
            "sock_current", "sock_error", "http_2xx", "http_err", "nic_ierrors", "nic_oerrors",
            "nic_imissed", "seq_lost", "seq_dup", "seq_reorder", "lat_count", "lat_sum_ns",
            "lat_min_ns", "lat_max_ns", "cpu_busy_ns", "cpu_wall_ns"}
    assert must <= set(COUNTER_NAMES)


def test_counter_names_are_unique_snake_case_and_kinds_known():
    assert len(set(COUNTER_NAMES)) == len(COUNTER_NAMES)
    for c in COUNTERS:
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", c.name), c.name
        assert c.kind in ("sum", "gauge", "min", "max")
        assert c.unit and c.label
    assert INDEX == {name: i for i, name in enumerate(COUNTER_NAMES)}
    kinds = {c.name: c.kind for c in COUNTERS}
    assert kinds["sock_current"] == "gauge"
    assert kinds["lat_min_ns"] == "min" and kinds["lat_max_ns"] == "max"
    assert kinds["pkts_tx"] == "sum"


@pytest.mark.parametrize("nworkers", [0, 1, 2, 5])
def test_row_schema_has_every_counter_and_rates_for_sums(nworkers):
    import polars as pl
    schema = row_schema(nworkers)
    cols = list(schema)
    assert cols[:2] == ["time_s", "interval_s"]
    for c in COUNTERS:
        assert schema[c.name] == pl.Int64
        if c.kind == "sum":
            assert schema[f"{c.name}_per_s"] == pl.Float64
            assert cols.index(f"{c.name}_per_s") == cols.index(c.name) + 1
        else:
            assert f"{c.name}_per_s" not in schema
    for name in DERIVED:
        assert schema[name] == pl.Float64
    workers = [c for c in cols if c.startswith("cpu_pct_w")]
    assert workers == [f"cpu_pct_w{w}" for w in range(nworkers)]
    nsum = sum(c.kind == "sum" for c in COUNTERS)
    assert len(cols) == 2 + N + nsum + len(DERIVED) + nworkers
    assert len(set(cols)) == len(cols)


def test_make_row_columns_are_exactly_row_schema():
    z = [0] * N
    row = make_row(1.0, 1.0, z, z, Histogram(), Histogram(), [z, z, z], [z, z, z])
    assert list(row) == list(row_schema(3))


# =============================================================== histogram
LOWER = _counters.hist_lower_bounds()
NB = len(LOWER)


def upper(i):
    return LOWER[i + 1] if i + 1 < NB else math.inf


def test_histogram_layout():
    assert NB == _counters.HIST_BUCKETS
    assert Histogram.LOWER == tuple(LOWER)
    assert _counters.HIST_SUB_BITS == 5
    assert LOWER[:32] == list(range(32))  # below 32 ns every value has its own bucket


def test_bucket_bounds_strictly_increase():
    assert LOWER[0] == 0
    assert all(a < b for a, b in zip(LOWER, LOWER[1:]))


def test_each_bucket_lower_and_last_value_map_back_to_it():
    for i in range(NB - 1):
        assert _counters.hist_index(LOWER[i]) == i
        assert _counters.hist_index(LOWER[i + 1] - 1) == i


def test_relative_bucket_width_at_most_1_32_above_32ns():
    worst = max((LOWER[i + 1] - LOWER[i]) / LOWER[i] for i in range(NB - 1) if LOWER[i] >= 32)
    assert worst <= 1 / 32
    assert worst == pytest.approx(1 / 32)  # and the layout really is log-linear, not finer


def _edge_values():
    vals = {0, 1, 2, 31, 32, 33, 63, 64, 65, 2**40}
    for k in range(1, 41):
        vals.update({2**k - 1, 2**k, 2**k + 1})
    return sorted(vals)


def test_every_value_lands_in_the_bucket_that_contains_it():
    rng = random.Random(20261130)
    values = _edge_values()
    values += [rng.randrange(0, 2**40 + 1) for _ in range(10_000)]           # uniform
    values += [int(2 ** rng.uniform(0, 40)) for _ in range(20_000)]         # log-uniform
    for v in values:
        i = _counters.hist_index(v)
        assert 0 <= i < NB
        assert LOWER[i] <= v < upper(i), (v, i, LOWER[i], upper(i))
        # and it agrees with a search of the bounds
        assert i == bisect.bisect_right(LOWER, v) - 1


def test_values_beyond_the_range_go_to_the_last_bucket():
    for v in (2**41 - 1, 2**41, 2**50, 2**64 - 1):
        assert _counters.hist_index(v) == NB - 1


def _hist_of(values):
    counts = [0] * NB
    for v in values:
        counts[_counters.hist_index(v)] += 1
    return Histogram(counts)


def _exact(sorted_values, q):
    rank = max(1, math.ceil(q * len(sorted_values) - 1e-9))
    return sorted_values[rank - 1]


@pytest.mark.parametrize("dist", ["lognormal", "loguniform", "uniform", "small"])
def test_percentile_within_3_2_percent_of_exact(dist):
    rng = random.Random({"lognormal": 1, "loguniform": 2, "uniform": 3, "small": 4}[dist])
    gen = {
        "lognormal": lambda: int(rng.lognormvariate(math.log(20_000), 1.0)),   # ~20 us
        "loguniform": lambda: int(2 ** rng.uniform(5, 40)),
        "uniform": lambda: rng.randrange(32, 2**40),
        "small": lambda: rng.randrange(0, 40),
    }[dist]
    values = [gen() for _ in range(20_000)]
    h = _hist_of(values)
    assert h.count == len(values)
    values.sort()
    for q in (0.0001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0):
        exact = _exact(values, q)
        got = h.percentile(q)
        if exact < 32:
            assert got == exact  # one value per bucket: exact
        else:
            assert abs(got - exact) / exact <= 0.032, (q, got, exact)
        # and the estimate is inside the very bucket that holds the exact value
        assert _counters.hist_index(math.floor(got)) == _counters.hist_index(exact), (q, got, exact)


def test_percentile_is_the_nearest_rank():
    h = _hist_of([10, 20, 30, 25])  # below 32 ns every bucket is one value: exact
    assert [h.percentile(q) for q in (0.0, 0.25, 0.26, 0.5, 0.51, 0.75, 0.76, 1.0)] == \
        [10, 10, 20, 20, 25, 25, 30, 30]


def test_percentile_empty_and_single_value():
    assert Histogram().percentile(0.5) is None
    assert Histogram().max() is None
    h = _hist_of([1_000_000])
    i = _counters.hist_index(1_000_000)
    mid = (LOWER[i] + LOWER[i + 1] - 1) / 2
    for q in (0.0, 0.5, 1.0):
        assert h.percentile(q) == mid
    assert h.max() == LOWER[i + 1] - 1


def test_histogram_arithmetic_and_round_trip():
    a = _hist_of([10, 10, 100, 5000])
    b = _hist_of([10, 7000])
    m = Histogram.merge([a.counts, array.array("Q", b.counts)])
    assert m.count == 6
    assert Histogram.merge([a, b]).counts == m.counts  # Histograms merge too
    assert (m - b).counts == a.counts
    assert m.nonzero() == [(10, 3), (_counters.hist_index(100), 1),
                           (_counters.hist_index(5000), 1), (_counters.hist_index(7000), 1)]
    assert Histogram.from_nonzero(m.nonzero()).counts == m.counts
    f = m.frame()
    assert f.columns == ["lower_ns", "upper_ns", "count"]
    assert f["count"].sum() == 6
    assert all(lo <= v < up for lo, up, v in zip(f["lower_ns"], f["upper_ns"], [10, 100, 5000, 7000]))
    with pytest.raises(ValueError, match="^histogram: "):
        Histogram([0] * (NB - 1))


# ========================================================= merge_counters
def test_merge_counters_by_kind():
    w0 = block(pkts_tx=10, sock_current=3, lat_min_ns=500, lat_max_ns=9000, bytes_rx=7)
    w1 = block(pkts_tx=5, sock_current=4, lat_min_ns=0, lat_max_ns=12000)    # 0 = none seen
    w2 = block(pkts_tx=1, sock_current=0, lat_min_ns=300, lat_max_ns=100)
    m = merge_counters([w0, w1, w2])
    assert m[INDEX["pkts_tx"]] == 16        # sum adds
    assert m[INDEX["bytes_rx"]] == 7
    assert m[INDEX["sock_current"]] == 7    # gauge adds
    assert m[INDEX["lat_min_ns"]] == 300    # min: smallest nonzero
    assert m[INDEX["lat_max_ns"]] == 12000  # max: largest
    assert merge_counters([w1, w0])[INDEX["lat_min_ns"]] == 500  # order does not matter
    assert merge_counters([w1])[INDEX["lat_min_ns"]] == 0        # none seen stays 0
    assert merge_counters([]) == [0] * N


def test_merge_counters_every_counter_follows_its_kind():
    rng = random.Random(7)
    blocks = [[rng.choice([0, rng.randrange(1, 10**9)]) for _ in range(N)] for _ in range(4)]
    m = merge_counters(blocks)
    for i, c in enumerate(COUNTERS):
        col = [b[i] for b in blocks]
        want = {"sum": sum(col), "gauge": sum(col), "max": max(col),
                "min": min([v for v in col if v] or [0])}[c.kind]
        assert m[i] == want, c.name


# ================================================================ make_row
def test_loss_pct():
    assert loss_pct(received=90, dup=0, lost=10) == pytest.approx(10.0)
    assert loss_pct(received=100, dup=10, lost=10) == pytest.approx(10.0)  # expected = 100
    assert loss_pct(received=50, dup=0, lost=0) == 0.0
    assert loss_pct(0, 0, 0) is None
    assert loss_pct(0, 0, 5) == pytest.approx(100.0)


def test_make_row_rates_are_delta_over_dt():
    rng = random.Random(3)
    prev = [rng.randrange(0, 10**6) for _ in range(N)]
    cur = [p + rng.randrange(0, 10**6) for p in prev]
    dt = 0.4000001234  # rates use the measured dt, not the rounded interval_s
    row = make_row(12.3456789, dt, prev, cur, Histogram(), Histogram(), [prev], [cur])
    assert row["time_s"] == 12.345679 and row["interval_s"] == 0.4
    wall = (cur[INDEX["cpu_wall_ns"]] - prev[INDEX["cpu_wall_ns"]]) / 1e9   # the cpu counters' own span
    for i, c in enumerate(COUNTERS):
        assert row[c.name] == cur[i]  # totals so far
        if c.kind == "sum":
            span = wall if c.group == "cpu" else dt
            assert row[f"{c.name}_per_s"] == pytest.approx((cur[i] - prev[i]) / span, rel=1e-12, abs=0)
    assert row["bits_tx_per_s"] == pytest.approx(8 * (cur[INDEX["bytes_tx"]] - prev[INDEX["bytes_tx"]]) / dt)
    assert row["bits_rx_per_s"] == pytest.approx(8 * (cur[INDEX["bytes_rx"]] - prev[INDEX["bytes_rx"]]) / dt)


def test_make_row_loss_cpu_and_latency_for_the_interval():
    prev_w = [block(pkts_rx=1000, seq_lost=0, cpu_busy_ns=0, cpu_wall_ns=0),
              block(pkts_tx=1000, lat_count=10, lat_sum_ns=10 * 1000, cpu_busy_ns=0, cpu_wall_ns=0)]
    cur_w = [block(pkts_rx=1900, seq_lost=100, seq_dup=0, cpu_busy_ns=100_000_000, cpu_wall_ns=500_000_000),
             block(pkts_tx=2000, lat_count=110, lat_sum_ns=10 * 1000 + 100 * 2000, jitter_sum_ns=99 * 50,
                   cpu_busy_ns=400_000_000, cpu_wall_ns=500_000_000)]
    prev_h = _hist_of([1000] * 10)
    cur_h = _hist_of([1000] * 10 + [2000] * 100)
    row = make_row(1.0, 0.5, merge_counters(prev_w), merge_counters(cur_w), prev_h, cur_h, prev_w, cur_w)
    assert row["pkts_rx_per_s"] == pytest.approx(1800.0)
    assert row["pkts_tx_per_s"] == pytest.approx(2000.0)
    assert row["loss_pct"] == pytest.approx(10.0)          # 100 lost of 1000 expected
    assert row["cpu_pct"] == pytest.approx(100.0)          # 0.5 s busy in 0.5 s
    assert row["cpu_pct_w0"] == pytest.approx(20.0)
    assert row["cpu_pct_w1"] == pytest.approx(80.0)
    assert row["lat_mean_us"] == pytest.approx(2.0)        # only this interval's 100 samples
    for p in ("p50", "p90", "p99", "p999"):                # the 1000 ns samples were earlier
        assert row[f"lat_{p}_us"] == pytest.approx(2.0, rel=0.032)
    assert 2.0 <= row["lat_max_us"] <= 2.0 * (1 + 1 / 32)
    assert row["jitter_us"] == pytest.approx(0.05)


def test_make_row_cpu_is_each_workers_busy_over_its_own_wall_time():
    # a short last interval: the worker last added 10 ms busy over 10 ms of its wall time,
    # and the row spans 2 ms of the sampler's; busy / dt would say 500 %
    prev_w = [block(cpu_busy_ns=990_000_000, cpu_wall_ns=1_000_000_000)]
    cur_w = [block(cpu_busy_ns=1_000_000_000, cpu_wall_ns=1_010_000_000)]
    row = make_row(1.002, 0.002, merge_counters(prev_w), merge_counters(cur_w), Histogram(), Histogram(),
                   prev_w, cur_w)
    assert row["cpu_pct"] == row["cpu_pct_w0"] == pytest.approx(100.0)


def test_a_short_last_row_gives_cpu_rates_over_the_time_they_cover():
    """Issue 32: a worker that published 1 s of wall time into a 0.2 s last row showed 4.47e9
    ns of wall time a second; the cpu counters' rates are over the workers' own wall advance."""
    prev_w = [block(cpu_busy_ns=0, cpu_wall_ns=0, pkts_tx=0), block(cpu_busy_ns=0, cpu_wall_ns=0)]
    cur_w = [block(cpu_busy_ns=600_000_000, cpu_wall_ns=1_000_000_000, pkts_tx=100),
             block(cpu_busy_ns=100_000_000, cpu_wall_ns=1_000_000_000)]
    row = make_row(5.2, 0.2, merge_counters(prev_w), merge_counters(cur_w), Histogram(), Histogram(), prev_w, cur_w)
    assert row["cpu_wall_ns_per_s"] == pytest.approx(2e9)     # two workers: two seconds a second
    assert row["cpu_busy_ns_per_s"] == pytest.approx(7e8)
    assert row["pkts_tx_per_s"] == pytest.approx(500)         # the live counters: over the row's 0.2 s
    # nothing published in the row: no wall advance, the sampler's interval
    row = make_row(5.4, 0.2, merge_counters(cur_w), merge_counters(cur_w), Histogram(), Histogram(), cur_w, cur_w)
    assert row["cpu_wall_ns_per_s"] == 0 and row["interval_s"] == 0.2


def test_rows_of_a_real_run_never_show_more_cpu_than_its_workers_have():
    import perfkit
    # 1 s at rows of 1 s: the last row spans the few ms until the workers end, and the workers
    # refresh their CPU counters every 10 ms (busy / dt showed 731 % there, perfkit local tcp_bw -t 1)
    for _ in range(3):
        for row in perfkit.run(perfkit.LocalTest("tcp_bw", duration=1)).rows:
            assert 0 <= row["cpu_pct"] <= 100 * 2 + 1, row   # each of 2 workers: at most all its time


def test_make_row_without_traffic_or_time():
    z = [0] * N
    row = make_row(0.0, 0.0, z, z, Histogram(), Histogram(), [z], [z])
    assert row["pkts_tx_per_s"] == 0.0 and row["cpu_pct"] == 0.0 and row["cpu_pct_w0"] == 0.0
    assert row["loss_pct"] is None
    for k in ("lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_max_us", "jitter_us"):
        assert row[k] is None


# ====================================================== latency / summary
def test_latency_fields_clamp_percentiles_to_exact_min_max():
    h = _hist_of([1_000_000] * 50)
    # without exact bounds: the bucket's middle, not 1000 us exactly
    loose = latency_fields(h, 50, 50 * 1_000_000, 0)
    assert loose["lat_p50_us"] != 1000.0
    assert loose["lat_p50_us"] == pytest.approx(1000.0, rel=0.032)
    tight = latency_fields(h, 50, 50 * 1_000_000, 0, lo_ns=1_000_000, hi_ns=1_000_000)
    for p in ("p50", "p90", "p99", "p999"):
        assert tight[f"lat_{p}_us"] == 1000.0
    assert tight["lat_max_us"] == 1000.0 and tight["lat_mean_us"] == 1000.0
    assert tight["jitter_us"] == 0.0
    assert latency_fields(Histogram(), 0, 0, 0)["lat_max_us"] is None


def _workers(test_roles, send_wall_ns=2_000_000_000):
    recv = block(pkts_rx=950, bytes_rx=950 * 64, seq_lost=50, cpu_busy_ns=500_000_000,
                 cpu_wall_ns=2_100_000_000, lat_count=950, lat_sum_ns=950 * 4000,
                 lat_min_ns=3000, lat_max_ns=9000)
    send = block(pkts_tx=1000, bytes_tx=1000 * 64, cpu_busy_ns=1_000_000_000, cpu_wall_ns=send_wall_ns)
    return [recv, send], test_roles


def test_summarize_udp_bw():
    workers, roles = _workers(["udp_recv", "udp_send"])
    h = _hist_of([4000] * 950)
    s = summarize("udp_bw", merge_counters(workers), h, workers, roles, 64)
    assert s["test"] == "udp_bw" and s["size"] == 64
    assert s["duration_s"] == pytest.approx(2.0)           # the sender's active time
    assert s["tx_pps"] == pytest.approx(500.0) and s["rx_pps"] == pytest.approx(475.0)
    assert s["tx_bps"] == pytest.approx(500.0 * 64 * 8)
    assert s["loss_pct"] == pytest.approx(5.0) and s["lost"] == 50
    assert s["lat_min_us"] == 3.0 and s["lat_max_us"] == 9.0
    assert s["latency_us"] == pytest.approx(4.0)           # one way already
    assert s["cpu_pct"] == pytest.approx(100 * 0.5 / 2.1 + 100 * 1.0 / 2.0)
    assert list(s["cpu_pct_by_worker"]) == ["w0_udp_recv", "w1_udp_send"]
    assert s["cpu_pct_by_worker"]["w1_udp_send"] == pytest.approx(50.0)


def test_summarize_latency_test_halves_the_round_trip():
    workers, roles = _workers(["udp_reflect", "udp_ping"])
    s = summarize("udp_lat", merge_counters(workers), _hist_of([4000] * 950), workers, roles, 1)
    assert s["lat_mean_us"] == pytest.approx(4.0)
    assert s["latency_us"] == pytest.approx(2.0)


def test_summarize_with_nothing_sent():
    z = [0] * N
    s = summarize("tcp_bw", z, Histogram(), [z, z], ["tcp_recv", "tcp_send"], 65536)
    assert s["duration_s"] == 0 and s["tx_pps"] == 0.0 and s["loss_pct"] is None
    assert s["latency_us"] is None and s["lat_min_us"] is None and s["cpu_pct"] == 0


def test_percentiles_table():
    assert stats.PERCENTILES == {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}


# =================================================================== groups
def test_groups_cover_every_counter_as_the_header_comments_say():
    assert set(stats.GROUPS) == {"traffic", "tcp", "sock", "http", "nic", "seq", "latency", "cpu", "probe", "control"}
    assert all(c.group in stats.GROUPS for c in COUNTERS)
    by = {g: {c.name for c in COUNTERS if c.group == g} for g in stats.GROUPS}
    assert sum(len(v) for v in by.values()) == N          # each counter in exactly one group
    assert {"pkts_tx", "bytes_rx", "drop_tx", "bad_rx"} <= by["traffic"]
    assert {"syn_tx", "rst_rx", "retrans_push", "tcp_drop"} <= by["tcp"]
    assert all(n.startswith("http_") or n.startswith("err_") for n in by["http"])
    assert all(n.startswith(("lat_", "jitter_")) for n in by["latency"])
    assert by["sock"] == {"sock_open", "sock_close", "sock_current", "sock_error", "close_timeout"}


def test_every_kind_declares_groups_that_exist():
    from perfkit import kinds, spec
    from perfkit.engines import _ENGINES, dpdk, dpdk_tcp, socket
    assert set(_ENGINES.values()) == {socket, dpdk, dpdk_tcp}
    samples = [spec.LocalTest("udp_bw"), spec.LocalTest("tcp_lat"), spec.HttpLoad(url="http://127.0.0.1:1/"),
               spec.HttpServe(port=0), spec.SocketReflect(), spec.DpdkFlows(), spec.DpdkReflect(),
               spec.DpdkHttpServer(), spec.DpdkHttpClient()]
    for s in samples:
        groups = kinds.counter_groups(s)
        assert groups and set(groups) <= set(stats.GROUPS) and {"traffic", "cpu"} <= set(groups), s
    assert "http" not in kinds.counter_groups(spec.LocalTest("udp_bw"))
    assert "http" in kinds.counter_groups(spec.HttpLoad(url="http://127.0.0.1:1/"))
    assert "tcp" in kinds.counter_groups(spec.DpdkHttpServer()) and "tcp" not in kinds.counter_groups(spec.DpdkFlows())
    assert kinds.counter_groups(object()) is None
    assert not any(hasattr(mod, "counter_groups") or hasattr(mod, "COUNTER_GROUPS") for mod in _ENGINES.values())


def test_row_schema_and_rows_keep_only_the_groups_asked_for():
    import polars as pl
    groups = ("traffic", "seq", "cpu")
    schema = row_schema(2, groups)
    assert "pkts_tx" in schema and "pkts_tx_per_s" in schema and "seq_lost" in schema
    assert not [c for c in schema if c.startswith(("http_", "syn_", "lat_count", "sock_"))]
    assert set(DERIVED) <= set(schema) and "cpu_pct_w1" in schema   # derived columns stay
    assert list(schema) == [c for c in row_schema(2) if c in schema]   # same order as the full row
    row = make_row(1.0, 1.0, [0] * N, block(pkts_tx=10, http_req=3), Histogram(), Histogram(), [[0] * N],
                   [block(pkts_tx=10, http_req=3)])
    kept = stats.keep_groups(row, groups)
    assert set(kept) == set(row_schema(1, groups)) and kept["pkts_tx"] == 10
    assert stats.keep_groups(row, None) is row
    assert stats.value(kept, "http_req") == 0 and stats.value(row, "http_req") == 3
    assert stats.value(kept, "lat_mean_us") is None          # present and empty stays None
    frame = pl.DataFrame([kept], schema=row_schema(1, groups), orient="row")
    assert stats.value(frame, "http_req_per_s").to_list() == [0]
    with pytest.raises(ValueError, match="nonesuch"):
        stats.dropped_columns(("traffic", "nonesuch"))


def test_every_row_column_has_a_label_and_unit_from_the_counter_list():
    for col in row_schema(3):
        assert stats.label_of(col), col
        assert stats.unit_of(col), col
    c = next(c for c in COUNTERS if c.name == "pkts_tx")
    assert stats.label_of("pkts_tx") == c.label and stats.unit_of("pkts_tx") == c.unit
    assert stats.label_of("pkts_tx_per_s") == f"{c.label}/s" and stats.unit_of("pkts_tx_per_s") == "pkt/s"
    assert stats.label_of("loss_pct") == DERIVED["loss_pct"] and stats.unit_of("lat_p99_us") == "µs"
    assert stats.label_of("nonesuch") is None
