"""perfkit.kinds: a module per kind of test and one registry (KINDS); the spec classes live in
their kinds, and the faces (charts, panel, run) take what a spec's kind declares."""
import pytest

import perfkit
from perfkit import kinds, spec
from perfkit.kinds import reflect
from perfkit.stats import row_schema


def _specs():
    return [cls for kind in kinds.KINDS for cls in kind.SPECS]


def test_every_spec_has_exactly_one_kind():
    assert spec.SPECS is kinds.SPECS and len(spec.SPECS) >= 9
    for name, cls in spec.SPECS.items():
        owners = [kind for kind in kinds.KINDS if cls in kind.SPECS]
        assert len(owners) == 1, name
        assert kinds.for_spec_class(cls) is owners[0] and cls.__module__ == owners[0].__name__
    assert len(_specs()) == len(set(_specs())) == len(spec.SPECS)


def test_every_kinds_specs_are_exported_by_perfkit_and_spec():
    for cls in _specs():
        name = cls.__name__
        assert getattr(perfkit, name) is cls and name in perfkit.__all__
        assert getattr(spec, name) is cls                  # from perfkit.spec import LocalTest
    assert spec.from_dict is kinds.from_dict and spec.from_dperf is kinds.from_dperf
    saved = {"kind": "LocalTest", "test": "udp_lat", "size": 1}   # a saved run's spec
    assert spec.from_dict(saved) == perfkit.LocalTest("udp_lat", size=1)


def test_a_spec_of_no_kind_is_refused_and_a_subclass_takes_its_bases_kind():
    with pytest.raises(ValueError, match="is not a spec of any kind"):
        kinds.for_spec_class(int)
    assert kinds.lookup(3, "LAYOUT", "none") == "none"

    class Mine(perfkit.LocalTest):
        pass
    assert kinds.for_spec_class(Mine) is kinds.qperf and kinds.lookup(Mine, "TASKS") == ("run", "search")


def test_every_kind_declares_engine_layout_and_tasks_for_each_spec():
    for kind in kinds.KINDS:
        assert set(kind.ENGINE) == set(kind.LAYOUT) == set(kind.TASKS) == set(kind.SPECS), kind.__name__
        for cls in kind.SPECS:
            assert kind.ENGINE[cls] in perfkit.engines()
            assert kind.TASKS[cls][0] == "run"


def test_the_charts_take_the_kinds_layouts():
    charts = pytest.importorskip("perfkit.ui.charts")
    for cls in _specs():
        name = kinds.for_spec_class(cls).LAYOUT[cls]
        assert charts.layout_name(cls) == name and charts.layout_for(cls) is charts.LAYOUTS[name]
    # a kind's own layout: SocketReflect's, in its module only
    own = charts.layout_for(perfkit.SocketReflect)
    assert [(t, [(ln.name, ln.key, ln.colour) for ln in lines]) for t, _, lines in own] == \
        [(t, [tuple(tr) for tr in lines]) for t, _, lines in reflect.LAYOUTS["socket_reflect"]]
    assert charts.layout_name(object()) == "socket"


def test_a_kinds_own_layout_reads_only_columns_a_run_has():
    columns = set(row_schema(1))
    for kind in kinds.KINDS:
        for name, panels in getattr(kind, "LAYOUTS", {}).items():
            for title, _axis, lines in panels:
                for trace, key, _colour in lines:
                    assert callable(key) or key in columns, (name, title, trace, key)


def test_the_panel_takes_the_kinds_tasks():
    pytest.importorskip("ipywidgets")
    panel = pytest.importorskip("perfkit.ui.panel")
    for name, cls in spec.SPECS.items():
        assert panel.TASKS[name] == kinds.lookup(cls, "TASKS")
    assert panel.Panel("RemoteTest").tasks == perfkit.kinds.qperf.TASKS[perfkit.RemoteTest]
    assert panel.Panel("DpdkFlows").engine_name == "dpdk"


def test_a_kind_adds_its_own_figures_to_a_summary():
    class Handle:   # an engine's handle: counts per URL for each HTTP client worker
        def http_urls(self, i):
            return [(5, 4, 1)]
    load = perfkit.HttpLoad(url="http://127.0.0.1:8080/", users=3)
    assert kinds.summary_extra(load, Handle(), ["http_client"]) == {
        "vusers": 3, "per_url": [{"url": "http://127.0.0.1:8080/", "requests": 5, "responses": 4, "failed": 1}]}
    assert kinds.summary_extra(perfkit.LocalTest("udp_lat", messages=10), None, []) == {"messages": 10}
    assert kinds.summary_extra(perfkit.LocalTest("udp_lat"), None, []) == {}
    assert kinds.summary_extra(object(), None, []) == {}


def test_the_http_kind_brings_its_commands():
    from perfkit import cli
    parser = cli._parser()
    a = parser.parse_args(["http", "http://127.0.0.1:8080/", "-u", "3", "-t", "2s"])
    assert kinds.http.CLI_SPECS[a.command](a) == perfkit.HttpLoad(url="http://127.0.0.1:8080/", users=3, duration=2)
    a = parser.parse_args(["http-serve", "--port", "8081"])
    assert kinds.http.CLI_SPECS[a.command](a) == perfkit.HttpServe(port=8081)
    assert kinds.http.cli_header(perfkit.HttpServe(port=8081)).startswith("perfkit http-serve: 127.0.0.1 port 8081")


def test_the_dashboard_title_is_the_kinds():
    charts = pytest.importorskip("perfkit.ui.charts")
    load = perfkit.HttpLoad(url="http://127.0.0.1:8080/x", users=5, duration=3)
    assert charts.spec_title(load) == ", ".join((*kinds.http.TITLE[perfkit.HttpLoad](load), "3 s"))
    remote = perfkit.RemoteTest("tcp_bw", host="127.0.0.1", duration=3)
    assert charts.spec_title(remote).startswith(kinds.qperf.TITLE_HEAD[perfkit.RemoteTest](remote) + ", ")
    assert charts.spec_title(perfkit.LocalTest("udp_bw", duration=3)) == "udp_bw, 64 B, unlimited, 3 s"
