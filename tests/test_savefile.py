"""Saved runs are sealed: a changed file is refused with one error naming it, never read as
another measurement; every load error says what is wrong in words."""
import json
import shutil

import polars as pl
import pyarrow.parquet as pq
import pytest

import perfkit
from perfkit import LocalTest
from perfkit.savefile import CHECKSUM_KEY, SaveFileError
from perfkit.store import Store


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    run = perfkit.run(LocalTest(test="udp_lat", host="127.0.0.1", duration=0.6), interval=0.2)
    path = tmp_path_factory.mktemp("runs") / "run.parquet"
    run.save(path)
    return run, path


def _same(a, b) -> bool:
    return a.frame.equals(b.frame) and a.summary == b.summary and a.env == b.env and a.roles == b.roles \
        and a.spec == b.spec and a.histogram.nonzero() == b.histogram.nonzero()


def test_a_saved_run_loads_as_it_was(saved):
    run, path = saved
    assert CHECKSUM_KEY in pq.read_metadata(path).metadata
    assert _same(perfkit.load(path), run)


def test_no_bit_flip_loads_as_other_data(saved, tmp_path):
    """Flip one bit at 80 places spread over the file: each load is refused or gives exactly
    the run that was saved (a flip in padding or an unused statistic changes nothing)."""
    run, path = saved
    data = path.read_bytes()
    refused = 0
    for k in range(80):
        pos = (k * 7919) % len(data)
        bad = bytearray(data)
        bad[pos] ^= 1 << (k % 8)
        f = tmp_path / f"flip{k}.parquet"
        f.write_bytes(bytes(bad))
        try:
            back = perfkit.load(f)
        except SaveFileError as exc:
            assert str(exc).startswith(f"{f}: "), exc
            assert "\n" not in str(exc)
            refused += 1
            continue
        assert _same(back, run), f"a flip at byte {pos} loaded other data"
    # about half the bytes are padding, statistics and page indexes no load reads (36-41 of 80 refused)
    assert refused >= 24, refused


def _rewrite(path, out, meta_change=None, table_change=None):
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    if meta_change:
        meta_change(meta)
    if table_change:
        table = table_change(table)
    pq.write_table(table.replace_schema_metadata(meta), out)


def test_an_edited_summary_or_renamed_column_is_refused(saved, tmp_path):
    _, path = saved

    def more_packets(meta):
        s = json.loads(meta[b"perfkit.summary"])
        s["pkts_rx"] += 1
        meta[b"perfkit.summary"] = json.dumps(s).encode()
    _rewrite(path, tmp_path / "a.parquet", meta_change=more_packets)
    with pytest.raises(SaveFileError, match=r"a\.parquet: the file has changed since it was saved"):
        perfkit.load(tmp_path / "a.parquet")
    _rewrite(path, tmp_path / "b.parquet",
             table_change=lambda t: t.rename_columns([("x" + n if n == "pkts_rx" else n) for n in t.column_names]))
    with pytest.raises(SaveFileError, match=r"b\.parquet: the file has changed since it was saved"):
        perfkit.load(tmp_path / "b.parquet")


def test_a_file_saved_before_checksums_still_loads(saved, tmp_path):
    run, path = saved
    _rewrite(path, tmp_path / "old.parquet", meta_change=lambda m: m.pop(CHECKSUM_KEY))
    assert _same(perfkit.load(tmp_path / "old.parquet"), run)


def test_load_errors_name_the_file_in_words(saved, tmp_path):
    _, path = saved
    cases = {tmp_path / "missing.parquet": "no such file", tmp_path: "not a regular file"}
    (tmp_path / "text.parquet").write_text("hello")
    cases[tmp_path / "text.parquet"] = "not a Parquet file, or its footer is damaged"
    (tmp_path / "cut.parquet").write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    cases[tmp_path / "cut.parquet"] = "not a Parquet file, or its footer is damaged"
    _rewrite(path, tmp_path / "json.parquet", meta_change=lambda m: m.update({b"perfkit.env": b"{oops"}))
    cases[tmp_path / "json.parquet"] = "its perfkit.env entry is damaged (not JSON)"
    _rewrite(path, tmp_path / "gone.parquet", meta_change=lambda m: m.pop(b"perfkit.run"))
    cases[tmp_path / "gone.parquet"] = "its perfkit metadata has no perfkit.run entry"
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "plain.parquet")
    cases[tmp_path / "plain.parquet"] = "not a perfkit run (no perfkit metadata)"
    for f, words in cases.items():
        with pytest.raises(ValueError) as exc:
            perfkit.load(f)
        assert str(exc.value) == f"{f}: {words}", exc.value


def test_the_store_seals_its_entry_and_refuses_a_changed_file(saved, tmp_path):
    run, _ = saved
    store = Store(tmp_path / "store")
    name = store.save(run, name="r1", tags=["a"], note="n")
    f = store.file(name)
    back = store.load(name)
    assert _same(back, run) and back.tags == ["a"] and back.note == "n"
    copy = tmp_path / "copy.parquet"
    shutil.copy(f, copy)

    def retag(meta):
        entry = json.loads(meta[b"perfkit.store"])
        entry["tags"] = ["b"]
        meta[b"perfkit.store"] = json.dumps(entry).encode()
    _rewrite(copy, f, meta_change=retag)
    with pytest.raises(SaveFileError, match="the file has changed since it was saved"):
        store.load(name)
