"""run.save(path) writes Parquet; perfkit.load(path) gives the same Run back."""
import json

import pytest

import perfkit
from perfkit.stats import Histogram, row_schema, value


@pytest.fixture(scope="module")
def finished_run():
    run = perfkit.run(perfkit.LocalTest("udp_bw", duration="0.5s", rate="20kpps"), interval=0.25)
    assert run.error is None and run.summary["pkts_rx"] > 0
    return run


@pytest.fixture(scope="module")
def saved(finished_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "udp_bw.parquet"
    assert finished_run.save(path) == str(path)
    return path


def test_file_is_parquet_with_perfkit_metadata(saved, finished_run):
    import pyarrow.parquet as pq
    assert saved.read_bytes()[:4] == b"PAR1"
    table = pq.read_table(saved)
    assert table.num_rows == len(finished_run.frame) >= 2
    meta = table.schema.metadata
    for key in (b"perfkit.spec", b"perfkit.env", b"perfkit.summary", b"perfkit.histogram", b"perfkit.run"):
        json.loads(meta[key])  # every part is JSON


def test_load_gives_the_same_frame(saved, finished_run):
    back = perfkit.load(saved)
    assert back.frame.schema == finished_run.frame.schema
    # the counter columns, then the host metrics' (perfkit.hostmetrics)
    assert dict(back.frame.schema) == {**row_schema(len(finished_run.roles), finished_run.groups),
                                       **finished_run.host_schema}
    assert back.frame.equals(finished_run.frame)
    assert back.rows == finished_run.rows


def test_load_gives_the_same_summary_spec_and_histogram(saved, finished_run):
    back = perfkit.load(saved)
    assert back.summary == finished_run.summary
    assert back.spec.to_dict() == finished_run.spec.to_dict()
    assert back.spec == finished_run.spec
    assert isinstance(back.histogram, Histogram)
    assert back.histogram.counts == finished_run.histogram.counts
    assert back.histogram.count == finished_run.summary["lat_count"] > 0


def test_load_keeps_the_environment_and_run_settings(saved, finished_run):
    back = perfkit.load(saved)
    for key in ("host", "kernel", "cpu_model", "perfkit", "engine"):
        assert key in back.env
    assert back.env["perfkit"] == perfkit.__version__
    assert back.env["engine"] == "socket"
    assert back.env == finished_run.env
    assert back.roles == finished_run.roles == ["udp_recv", "udp_send"]
    assert back.interval == 0.25 and back.engine_name == "socket" and back.error is None
    assert back.done


def test_the_saved_run_adds_up(saved):
    back = perfkit.load(saved)
    f = back.frame
    assert f["pkts_tx"][-1] == back.summary["pkts_tx"]
    assert f["pkts_rx"][-1] == back.summary["pkts_rx"]
    # rates times intervals give back the totals
    assert (f["pkts_tx_per_s"] * f["interval_s"]).sum() == pytest.approx(back.summary["pkts_tx"], rel=1e-3)
    assert f["time_s"].is_sorted()


def test_a_loaded_run_saves_again_unchanged(saved, tmp_path):
    back = perfkit.load(saved)
    again = perfkit.load(back.save(tmp_path / "again.parquet"))
    assert again.frame.equals(back.frame)
    assert again.summary == back.summary and again.spec == back.spec and again.env == back.env
    assert again.histogram.counts == back.histogram.counts


def test_save_before_the_run_finished_is_refused(tmp_path):
    run = perfkit.Run(perfkit.LocalTest("udp_bw", duration="0.5s"))
    with pytest.raises(RuntimeError, match="wait"):
        run.save(tmp_path / "early.parquet")
    assert not (tmp_path / "early.parquet").exists()


def test_load_refuses_a_parquet_file_that_is_not_a_run(tmp_path):
    import polars as pl
    path = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1, 2]}).write_parquet(path)
    with pytest.raises(ValueError, match="not a perfkit run"):
        perfkit.load(path)


def test_a_run_saved_with_every_counter_column_still_loads_and_compares(finished_run, tmp_path):
    """Runs saved before frames kept only their engine's counter groups have every column:
    they load as they are, compare with a run of today, and an absent column reads as 0."""
    import polars as pl
    old = perfkit.load(finished_run.save(tmp_path / "now.parquet"))
    full = {**row_schema(len(old.roles)), **finished_run.host_schema}   # the host metrics' columns kept
    old._frame = old.frame.with_columns([pl.lit(0, dtype=dtype).alias(c) for c, dtype in full.items()
                                         if c not in old.frame.columns]).select(list(full))
    old.rows = old._frame.to_dicts()
    back = perfkit.load(old.save(tmp_path / "before.parquet"))
    assert dict(back.frame.schema) == full and "http_req" in back.frame.columns
    assert "http_req" not in finished_run.frame.columns
    assert back.frame.select(finished_run.frame.columns).equals(finished_run.frame)
    cmp = perfkit.compare([back, finished_run], names=["before", "now"])
    assert len(cmp.table) >= 1 and len(cmp.figure().data) >= 4
    html = cmp.report(tmp_path / "cmp.html")
    assert "before" in open(html).read()
    assert value(finished_run.frame, "http_req").to_list() == [0] * len(finished_run.frame)
    assert value(finished_run.rows[-1], "http_req") == 0
    assert value(back.frame, "pkts_tx").equals(finished_run.frame["pkts_tx"])
