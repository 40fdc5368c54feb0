"""The notebook front door: the Panel generated from a spec, the live Dashboard,
and a real kernel staying responsive while a run is live."""
import dataclasses
import re
import statistics
import threading
import time

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

import ipywidgets  # noqa: E402
import polars  # noqa: E402,F401  (imported by every run's start; not what is timed here)

import perfkit  # noqa: E402
import perfkit.ui  # noqa: E402
from perfkit import LocalTest  # noqa: E402
from perfkit import spec as specs  # noqa: E402
from perfkit.spec import LOCAL_TESTS, SPECS  # noqa: E402

from _sock_tests import serving  # noqa: E402

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


# ------------------------------------------------------------------ Panel: the form
def test_panel_has_an_input_for_every_spec_field():
    panel = perfkit.ui.Panel()
    names = [f.name for f in dataclasses.fields(LocalTest)]
    assert list(panel.inputs) == names
    kinds = {name: type(box) for name, box in panel.inputs.items()}
    assert kinds["test"] is ipywidgets.Dropdown
    assert tuple(panel.inputs["test"].options) == LOCAL_TESTS
    for name in ("size", "rate", "duration", "host", "gso"):   # gso: empty is its default (None)
        assert kinds[name] is ipywidgets.Text, name
    for name in ("flows", "port", "batch"):
        assert kinds[name] is ipywidgets.IntText, name
    assert kinds["busy_poll"] is ipywidgets.Dropdown    # auto (None: the spec decides), on, off
    assert panel.inputs["busy_poll"].value == "auto" and tuple(panel.inputs["busy_poll"].options) == (
        "auto", "on", "off")
    assert all(panel.labels[n] for n in names)
    # the defaults make a valid spec: Start is enabled, Stop is not
    assert panel.error is None and panel.spec == LocalTest()
    assert not panel.start_button.disabled and panel.stop_button.disabled
    assert "ready" in panel.message.value


@pytest.mark.parametrize("field, value", [
    ("size", "100K"),           # above the largest UDP payload
    ("rate", "fast"),           # not a rate
    ("duration", "-1s"),
    ("host", "8.8.8.8"),        # only loopback and lab hosts
    ("port", 70000),
    ("flows", 0),
])
def test_invalid_input_shows_the_message_and_disables_start(field, value):
    panel = perfkit.ui.Panel(duration="1s")
    panel.set(**{field: value})
    assert panel.spec is None
    assert panel.error.startswith(f"{field}:")
    with pytest.raises(ValueError) as exc:        # the spec's own message, shown as is
        LocalTest(**panel.values())
    assert str(exc.value) == panel.error
    assert panel.start_button.disabled
    assert "⚠" in panel.message.value and field in panel.message.value
    assert "⚠" in panel.labels[field].value          # the field itself is marked
    with pytest.raises(ValueError):
        panel.start()                                 # nothing starts from a bad form
    assert panel.run is None


def test_typing_validates_on_every_change_and_valid_input_enables_start():
    panel = perfkit.ui.Panel(duration="1s")
    panel.inputs["size"].value = "64Q"                 # as a person types it
    assert panel.start_button.disabled and panel.error.startswith("size:")
    panel.inputs["size"].value = "1500"
    assert panel.error is None and not panel.start_button.disabled
    assert panel.spec.size == 1500
    panel.inputs["test"].value = "tcp_lat"
    panel.inputs["flows"].value = 4                     # only udp_bw takes flows
    assert panel.start_button.disabled and panel.error.startswith("flows:")
    panel.inputs["flows"].value = 1
    panel.inputs["size"].value = ""                     # empty: the test's default size
    panel.inputs["rate"].value = "10kpps"
    panel.inputs["busy_poll"].value = "on"
    assert not panel.start_button.disabled
    assert panel.spec == LocalTest("tcp_lat", rate="10kpps", duration="1s", busy_poll=True)
    panel.inputs["busy_poll"].value = "off"
    assert panel.spec == LocalTest("tcp_lat", rate="10kpps", duration="1s", busy_poll=False)
    for value, busy_poll in ((True, True), ("auto", None), ("off", False), (None, None), ("on", True)):
        assert panel.set(busy_poll=value).spec.busy_poll is busy_poll   # as Python says it, or as the drop-down
    for bad in ("yes", 2):
        with pytest.raises(ValueError, match="busy_poll: .*None, True or False"):
            panel.set(busy_poll=bad)


def test_panel_starts_from_a_spec_instance():
    spec = LocalTest("udp_lat", size=32, duration="3s")
    panel = perfkit.ui.Panel(spec)
    assert panel.spec == spec
    with pytest.raises(ValueError, match="colour: unknown field"):
        perfkit.ui.Panel(colour="red")


# ------------------------------------------------- every spec: the form from its fields
WIDGET_OF = {"choice": ipywidgets.Dropdown, "tristate": ipywidgets.Dropdown, "combo": ipywidgets.Combobox,
             "bool": ipywidgets.Checkbox, "int": ipywidgets.IntText, "text": ipywidgets.Text, "secret": ipywidgets.Password,
             "lines": ipywidgets.Textarea, "area": ipywidgets.Textarea, "ranges": ipywidgets.Text,
             "pair": ipywidgets.Text}


@pytest.mark.parametrize("name", list(SPECS))
def test_every_spec_gets_a_form_from_its_fields_with_units_ranges_choices_and_defaults(name):
    cls = SPECS[name]
    panel = perfkit.ui.Panel(name)                    # by name, or the class itself
    assert panel.spec_cls is cls
    assert list(panel.inputs) == [f.name for f in dataclasses.fields(cls)]
    form = {fu.name: fu for fu in panel.form}
    for fname, box in panel.inputs.items():
        assert type(box) is WIDGET_OF[form[fname].kind], fname
        assert form[fname].help, f"{name}.{fname} has no help line"
    # the essential fields' rows first, in the form; the advanced ones folded under "Advanced"
    essential, advanced = perfkit.fields.essential_and_advanced(cls)
    shown = [c for c in panel.widget.children if isinstance(c, ipywidgets.HBox) and c.children
             and c.children[0] in panel.labels.values()]
    assert [r.children[1] for r in shown] == [panel.inputs[n] for n in essential]
    if advanced:
        box = panel.advanced_box
        assert isinstance(box, ipywidgets.Accordion) and box.get_title(0) == "Advanced"
        assert box.selected_index is None and box in panel.widget.children   # closed
        assert [r.children[1] for r in box.children[0].children] == [panel.inputs[n] for n in advanced]
    else:
        assert panel.advanced_box is None
    # the defaults make the spec's own default instance, and Start is enabled
    assert panel.error is None and panel.spec == cls(), panel.error
    assert not panel.start_button.disabled and panel.stop_button.disabled
    # choices are the spec's own lists
    want = {"test": getattr(cls, "TESTS", None), "mode": getattr(cls, "MODES", specs.DPDK_MODES), "method": specs.HTTP_METHODS,
            "http_method": specs.DPERF_HTTP_METHODS}
    for fname, opts in want.items():
        if fname in panel.inputs:
            assert tuple(panel.inputs[fname].options) == opts, fname
    # every numeric range shown is the spec's: both ends pass, one step out is its error
    ranged = [fu for fu in panel.form if fu.bounds]
    assert ranged or name == "HttpLoad" and form["users"].bounds
    for fu in ranged:
        lo, hi = fu.bounds
        assert f"range {lo}..{hi}" in panel.units[fu.name].value
        # fields whose top end holds only beside another field's value (the spec's cross-field checks)
        needs = {"gso": {"size": 64},                                  # 64 datagrams fit one send only up to 1023 B
                 "pipeline": {"protocol": "udp", "keepalive": "1ms"}}.get(fu.name, {})
        needs = {k: v for k, v in needs.items() if k in form}
        panel.set(**needs)
        for ok in (lo, hi):
            panel.set(**{fu.name: ok})
            assert panel.error is None, (fu.name, ok, panel.error)
        for bad in (lo - 1, hi + 1):
            panel.set(**{fu.name: bad})
            assert panel.error and panel.error.startswith(f"{fu.name}:"), (fu.name, bad, panel.error)
            assert panel.start_button.disabled
        panel.set(**{fu.name: fu.default})
        panel.set(**{k: form[k].default for k in needs})
    assert panel.error is None
    # units and defaults show next to the inputs
    for fu in panel.form:
        if fu.unit:
            assert html_escape(fu.unit) in panel.units[fu.name].value
    if "duration" in form:
        assert "default" in panel.units["duration"].value and "seconds (500ms" in panel.units["duration"].value


def html_escape(text):
    import html
    return html.escape(text)


@pytest.mark.parametrize("name, field, value", [
    ("RemoteTest", "size", "70000"),
    ("RemoteTest", "host", "10.0.0.1"),
    ("DpdkFlows", "port", "eth0"),
    ("DpdkFlows", "size", "63"),
    ("DpdkFlows", "peer", "ring:pk:0"),          # the port itself
    ("DpdkFlows", "ip", "10.1.1.1"),
    ("DpdkFlows", "dst_mac", "aa:bb"),
    ("DpdkFlows", "port", "net_af_packet0,iface=veth0"),   # reaches a kernel: needs netns
    ("DpdkReflect", "mode", None),                # not settable to a bad value: a dropdown
    ("DpdkReflect", "netns", "lab1"),
    ("DpdkReflect", "peer", "ring:pk:0"),         # the other end of its own port's ring pair (mode is reverse)
    ("HttpLoad", "url", "ftp://127.0.0.1/"),     # http or https only
    ("HttpLoad", "url", "http://127.0.0.1:80/ http://127.0.0.2:80/"),   # a URL list: one server
    ("DpdkFlows", "sizes", "64:7,9100:1"),
    ("DpdkFlows", "ramp_to", "2Mpps"),             # a ramp starts from rate: none given
    ("DpdkHttpServer", "clients", "198.18.0.1+300"),
    ("DpdkHttpServer", "mss", 2000),
    ("DpdkHttpClient", "lport_range", "2000-1000"),
    ("DpdkHttpClient", "lport_range", "a-b-c"),
    ("DpdkHttpClient", "cc", "10"),                # a concurrency target needs keepalive
    ("DpdkHttpClient", "http_path", "nope"),
    ("HttpLoad", "rate", "10Mbps"),               # requests/s only
    ("HttpLoad", "headers", "X-Broken"),
    ("HttpLoad", "think", "-1s"),
    ("HttpServe", "size", "2M"),
    ("HttpServe", "host", "10.0.0.1"),           # the suite's network guard refuses it
])
def test_each_specs_own_error_shows_inline_before_anything_starts(name, field, value):
    panel = perfkit.ui.Panel(name, duration="1s")
    if value is None:   # a dropdown offers only what the spec takes
        assert tuple(panel.inputs[field].options) == getattr(SPECS[name], "MODES", specs.DPDK_MODES)
        return
    panel.set(**{field: value})
    assert panel.spec is None and panel.error.startswith(f"{field}:"), panel.error
    if field != "headers":   # the spec's own message, shown as is
        with pytest.raises(ValueError) as exc:
            SPECS[name](**panel.values())
        assert str(exc.value) == panel.error
    assert panel.start_button.disabled
    assert "⚠" in panel.labels[field].value and html_escape(panel.error) in panel.message.value
    with pytest.raises(ValueError):
        panel.start()
    assert panel.run is None


@pytest.mark.parametrize("spec", [
    specs.RemoteTest("udp_lat", size=32, rate="1.5Mpps", port=12345, busy_poll=True, duration="3s"),
    specs.HttpLoad("http://127.0.0.1:8081/x?y=1", users=3, rate="2500", think="0.1", ramp="2s", keepalive=False,
                   method="POST", headers={"X-Test": "1", "Accept": "*/*"}, body="hello"),
    specs.HttpServe(port=0, size="4K", connections=50),
    specs.DpdkFlows(port="ring:ab:0", peer="ring:ab:1", mode="reverse", size=128, rate="123456pps",
                    flows=7, dst_mac="02:00:00:00:00:01", burst=8),
    specs.DpdkReflect(port="net_null0", mode="rxonly", flows=4),
    specs.DpdkFlows(port="ring:ab:0", peer="ring:ab:1", sizes="imix", rate="100kpps", ramp_to="200kpps",
                    ramp_time="1s", duration="2s", cores=2, flows=4, src_ips=2, peer_ip="198.18.1.2", dports=2),
    specs.HttpLoad(["http://127.0.0.1:8081/a", "http://127.0.0.1:8081/b?c=d"], url_order="random", lab="l1"),
    specs.DpdkHttpServer(clients=(("198.18.0.1", 4), ("198.18.1.1", 2)), listen=8080, listen_num=2,
                         payload_size="1K", keepalive=True, retransmit_timeout="200ms"),
    specs.DpdkHttpClient(cps="2k", cc="100", keepalive="1s", lport_range=(2000, 3000), http_method="POST",
                         payload_size=100, gateway_mac="02:00:00:00:00:02", slow_start="1s", fast_close=True),
])
def test_a_panel_started_from_any_spec_instance_describes_it_exactly(spec):
    panel = perfkit.ui.Panel(spec)
    assert panel.error is None and panel.spec == spec, panel.error


def test_an_engine_that_is_not_available_disables_start():
    panel = perfkit.ui.Panel(engine="nosuch")
    assert panel.spec is None and panel.error.startswith("engine:")
    assert panel.start_button.disabled


# ------------------------------------------------------------- Dashboard: live + static
def test_dashboard_draws_live_on_one_thread_and_ends_with_a_static_figure():
    run = perfkit.Run(LocalTest("udp_bw", rate="20kpps", duration="1.5s"), interval=0.1)
    dash = perfkit.ui.Dashboard(run, window=5, redraw_s=0.2)
    out = ipywidgets.Output()
    dash.attach(out)
    assert dash.figure is not None                     # built by the drawing thread
    assert WIDGET in out.outputs[0]["data"]            # the live widget is shown
    run.start()
    live_points = []
    while not run.done:
        live_points.append(len(dash.figure.data[0].x))
        time.sleep(0.05)
    assert dash.wait(30)
    rows = run.rows
    assert len(rows) >= 10
    assert dash.redraws >= 3                           # several live redraws and the final one
    assert max(live_points) <= 5                       # the live window is bounded
    # exactly one thread drew, and it is neither this one nor the run's sampler
    assert dash.draw_threads == {dash._thread.ident}
    assert threading.get_ident() not in dash.draw_threads
    assert run._thread.ident not in dash.draw_threads
    # the static figure has every row but the drain after the planned end: a point per row in every trace
    from perfkit.ui import charts
    fig = dash.static()
    assert type(fig).__name__ == "Figure"
    shown = charts.plot_rows(run)
    assert len(rows) - 3 <= len(shown) <= len(rows) and len(shown) >= 10
    for trace in fig.data:
        assert len(trace.x) == len(shown), trace.name
    tx = next(t for t in fig.data if t.name == "tx pkt/s")
    assert list(tx.x) == [r["time_s"] for r in shown]
    assert list(tx.y) == [r["pkts_tx_per_s"] for r in shown]
    assert tx.x[-1] <= 1.5 + 0.11                        # nothing plotted after the planned end
    # and it replaced the live widget where it was shown, with plotly's own HTML beside it
    data = out.outputs[0]["data"]
    assert WIDGET not in data and PLOTLY in data
    assert len(data[PLOTLY]["data"][0]["x"]) == len(shown)
    assert "finished" in data[PLOTLY]["layout"]["title"]["text"]
    assert '<div id="' in data["text/html"] and "plotly" in data["text/html"]


def test_every_chart_trace_is_named_by_the_counter_list_unless_its_layout_names_it():
    from perfkit.stats import label_of
    from perfkit.ui import charts
    named_by_list = 0
    for layout, panels in charts.LAYOUTS.items():
        for _, _, lines in panels:
            for line in lines:
                assert isinstance(line, charts.Line), (layout, line)
                if not line.override:
                    assert line.name == label_of(line.key), (layout, line)
                    named_by_list += 1
                else:
                    assert line.name, (layout, line)
                if isinstance(line.key, str):   # every column a chart reads is in the row list
                    assert label_of(line.key), (layout, line.key)
    assert named_by_list >= 2
    assert charts._line("sock_error_per_s", "#000").name == "connection errors/s"
    assert charts._line("sock_error_per_s", "#000", "errs").name == "errs"
    with pytest.raises(ValueError, match="name the trace"):
        charts._line(lambda row: 0, "#000")
    # a trace whose column the run's engine does not write is a line of gaps, not an error
    fig = charts.empty_figure("t", charts.HTTP_PANELS)
    x, ys = charts.columns([{"time_s": 0.0}], charts.HTTP_PANELS)
    assert len(ys) == len(fig.data) and x == [0.0]


def test_dashboard_of_a_finished_or_loaded_run_is_static(tmp_path):
    run = perfkit.run(LocalTest("tcp_lat", duration="0.5s"), interval=0.1)
    back = perfkit.load(run.save(tmp_path / "r.parquet"))
    dash = perfkit.ui.Dashboard(back)
    assert dash.wait(30)
    n = len(perfkit.ui.charts.plot_rows(back))
    assert [len(t.x) for t in dash.static().data] == [n] * len(dash.static().data)
    hist = perfkit.ui.histogram_figure(back)
    assert sum(hist.data[0].y) == pytest.approx(100.0)


def test_dashboard_attached_to_a_running_run_gets_the_earlier_rows_too():
    run = perfkit.Run(LocalTest("udp_bw", rate="20kpps", duration="1s"), interval=0.1).start()
    time.sleep(0.45)
    dash = perfkit.ui.Dashboard(run, redraw_s=0.2)
    assert dash.wait(30) and run.done
    assert [r["time_s"] for r in perfkit.ui.charts.plot_rows(run)] == list(dash.static().data[0].x)
    assert list(dash.figure.data[0].x) == list(dash.static().data[0].x)   # the last redraw has all


# ------------------------------------------------------ Start/Stop return at once
def test_start_returns_at_once_and_the_run_goes_on_until_stop():
    panel = perfkit.ui.Panel(test="udp_bw", rate="20kpps", duration="20s", interval=0.2)
    t0 = time.monotonic()
    run = panel.start()
    took = time.monotonic() - t0
    assert took < 0.1, f"Start took {took * 1000:.0f} ms"
    assert not run.done and panel.running
    assert panel.start_button.disabled and not panel.stop_button.disabled
    # this (the kernel's) thread is free while the run is live: 10 ms naps come back on
    # time (the median; one can be late when the 2-core machine is busy elsewhere)
    lags = []
    for _ in range(20):
        t = time.monotonic()
        time.sleep(0.01)
        lags.append(time.monotonic() - t - 0.01)
    assert statistics.median(lags) < 0.02 and max(lags) < 1.0, lags
    assert not run.done
    time.sleep(0.5)
    t0 = time.monotonic()
    panel.stop()
    assert time.monotonic() - t0 < 0.1
    assert panel.wait(30) is run and run.done
    assert run.rows[-1]["time_s"] < 10                   # stopped long before 20 s
    assert not panel.start_button.disabled and panel.stop_button.disabled
    assert re.search(r"stopped by you after [\d.]+ of 20 s: ", panel.status.value), panel.status.value
    assert panel.progress.bar_style == "warning" and 0 < panel.progress.value < 0.5   # where Stop left it
    assert PLOTLY in panel.output.outputs[0]["data"]     # the static chart under the form


# ----------------------------------------------------------------- a real kernel
def test_a_kernel_runs_other_cells_while_a_run_is_live(tmp_path):
    """Start from a cell, then execute more cells while the run and its dashboard
    draw from background threads (ipykernel >= 7.1); no errors from those threads.
    The runs are paced: an unpaced one spins both ends on both of this machine's cores,
    and what is measured here is that nothing of perfkit's holds the kernel up."""
    jupyter_client = pytest.importorskip("jupyter_client")
    ipykernel_spec = pytest.importorskip("ipykernel.kernelspec")

    class ThisEnv(jupyter_client.kernelspec.KernelSpecManager):
        def get_kernel_spec(self, kernel_name):  # the kernel of this python, like nbval's
            return self.kernel_spec_class(resource_dir=ipykernel_spec.RESOURCES,
                                          **ipykernel_spec.get_kernel_dict())

    km = jupyter_client.KernelManager(kernel_name="this-env", kernel_spec_manager=ThisEnv())
    km.start_kernel(cwd=str(tmp_path))   # not the checkout: its perfkit/ has no compiled parts
    kc = km.client()
    kc.start_channels()
    problems, updates = [], []

    def cell(code, timeout=60):
        t0 = time.monotonic()
        msg_id = kc.execute(code)
        out = []
        while True:
            msg = kc.get_iopub_msg(timeout=timeout)
            kind, content = msg["msg_type"], msg["content"]
            if kind == "update_display_data":
                updates.append(content)
            if kind == "error" or (kind == "stream" and content["name"] == "stderr"):
                problems.append(content)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if kind == "stream":
                out.append(content["text"])
            if kind == "error":
                raise AssertionError("cell failed: " + "\n".join(content["traceback"]))
            if kind == "status" and content["execution_state"] == "idle":
                return time.monotonic() - t0, "".join(out)

    try:
        kc.wait_for_ready(timeout=60)
        cell("import time, polars, perfkit, perfkit.ui\n"
             "p = perfkit.ui.Panel(test='udp_bw', rate='20kpps', duration='3s', interval=0.5)\n"
             "display(p)")
        # a person reads the form before pressing Start: the panel warms plotly up meanwhile
        cell("perfkit.ui.panel.warm.wait(60)")
        # the same cells with no run live: what this machine takes anyway (a busy one takes more)
        idle = []
        for _ in range(6):
            idle.append(cell("print(None)")[0])
            time.sleep(0.1)
        idle_median, idle_max = statistics.median(idle), max(idle)
        _, text = cell("t0 = time.monotonic(); r = p.start()\n"
                       "print(time.monotonic() - t0, r.done)")
        took, done = text.split()
        assert float(took) < 0.1 and done == "False"
        rounds = []
        for _ in range(6):
            dt, text = cell("print(r.done)")
            rounds.append((dt, text.strip()))
            time.sleep(0.1)
        assert rounds[0][1] == "False"                 # the run was live during these cells
        # the run adds under 100 ms to a cell's answer (the median), never a second
        assert statistics.median(dt for dt, _ in rounds) < 0.1 + idle_median, (rounds, idle)
        assert max(dt for dt, _ in rounds) < 1.0 + idle_max, (rounds, idle)
        _, text = cell("p.wait(30); d = p.dashboard\n"
                       "print(r.done, len(r.rows), d.draw_threads == {d._thread.ident}, d.redraws)")
        done, nrows, one_thread, redraws = text.split()
        assert done == "True" and int(nrows) >= 5 and one_thread == "True" and int(redraws) >= 1
        # show(): a live chart in the cell's output, replaced by a static figure at the end
        cell("d = perfkit.ui.show(perfkit.LocalTest('tcp_lat', duration='1s'))")
        _, text = cell("print(d.wait(30), d.run.done)")
        assert text.split() == ["True", "True"]
        assert any(PLOTLY in u["data"] for u in updates), "the live chart was not replaced"
        # DPDK flows from their panel: EAL's first start in this kernel happens in the panel's
        # starter thread, so Start still returns at once and cells run while frames flow
        _, text = cell("print(perfkit.engines()['dpdk']['available'])")
        assert text.strip() == str(perfkit.engines()["dpdk"]["available"])   # the same perfkit
        if text.strip() == "True":
            cell("q = perfkit.ui.Panel('DpdkFlows', port='ring:k:0', peer='ring:k:1', rate='50kpps',\n"
                 "                     flows=16, duration='2s', interval=0.5)\n"
                 "display(q)")
            _, text = cell("t0 = time.monotonic(); r = q.start()\n"
                           "print(time.monotonic() - t0, r.done)")
            took, done = text.split()
            assert float(took) < 0.1 and done == "False"
            rounds = []
            for _ in range(5):
                dt, text = cell("print(r.done)")
                rounds.append((dt, text.strip()))
                time.sleep(0.1)
            assert rounds[0][1] == "False" and max(dt for dt, _ in rounds) < 1.0 + idle_max, (rounds, idle)
            _, text = cell("q.wait(60); s = r.summary\n"
                           "print(r.error, s['pkts_tx'], s['lost'], r.rows[-1]['udp_rx'], s['engine'])")
            err, sent, lost, got, engine = text.split()
            assert err == "None" and engine == "dpdk" and lost == "0"
            assert int(sent) == int(got) == pytest.approx(100_000, rel=0.05)
        # the starts left no threads behind: the starter threads are real threads that end
        # (a thread started below threading, then touched by ipykernel, stays listed forever)
        _, text = cell("import threading\n"
                       "print(sum(isinstance(t, threading._DummyThread) for t in threading.enumerate()),\n"
                       "      sum(t.name == 'perfkit-ui-start' for t in threading.enumerate()))")
        assert text.split() == ["0", "0"], text
        assert not problems, problems
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# ------------------------------------------- every spec runs from its panel (real runs)
def _dpdk_or_skip():
    st = perfkit.engines()["dpdk"]
    if not st["available"]:
        pytest.skip(f"the dpdk engine is not available here: {st['detail']}")


def _trace_names(fig):
    return [t.name for t in fig.data]


def _start_at_once(panel):
    t0 = time.monotonic()
    run = panel.start()
    took = time.monotonic() - t0
    assert took < 0.1, f"Start took {took * 1000:.0f} ms"
    assert panel.running and panel.start_button.disabled and not panel.stop_button.disabled
    return run


def test_dpdk_flows_from_the_panel_on_a_ring_pair_with_the_dpdk_charts():
    _dpdk_or_skip()
    panel = perfkit.ui.Panel("DpdkFlows", port="ring:uia:0", peer="ring:uia:1", rate="20kpps",
                             flows=8, duration="1s", interval=0.25, redraw_s=0.2)
    assert panel.engine_name == "dpdk" and "dpdk engine" in panel.widget.children[0].value
    run = _start_at_once(panel)                 # EAL's first start, if it is, runs in the starter thread
    assert panel.wait(60) is run and run.done and run.error is None, run.error
    s = run.summary
    assert s["pkts_tx"] == pytest.approx(20_000, rel=0.05) and s["pkts_rx"] == s["pkts_tx"]
    assert s["lost"] == 0 and s["engine"] == "dpdk"
    dash = panel.dashboard
    names = _trace_names(dash.figure)
    for want in ("tx pkt/s", "rx pkt/s", "p99 µs", "loss %", "lost/s", "reordered/s", "duplicates/s",
                 "cpu % (all workers)", "busiest worker %"):
        assert want in names, (want, names)
    fig = dash.static()
    assert _trace_names(fig) == names and all(len(t.x) == len(perfkit.ui.charts.plot_rows(run)) for t in fig.data)
    assert dash.draw_threads == {dash._thread.ident}
    assert "finished" in panel.status.value and "kpps" in panel.status.value
    assert PLOTLY in panel.output.outputs[0]["data"]


def _rows_past(run, n: int, timeout: float = 30.0) -> float:
    """Wait until the run has n rows (rows, not sleeps: a busy sampler may be late); its last time_s."""
    deadline = time.monotonic() + timeout
    while len(run.rows) < n:
        assert time.monotonic() < deadline and not run.done, (len(run.rows), run.error)
        time.sleep(0.01)
    return run.rows[-1]["time_s"]


@pytest.mark.dpdk
def test_the_live_rate_control_retunes_a_running_dpdk_flows_run_and_the_chart_draws_the_target():
    """pktgen's `set rate` in the DpdkFlows panel: shown only while the run is live; a typed rate
    and a slider move each reach run.set_rate, a bad one is one red line and changes nothing;
    the rows after each change carry the new rate_target, and the chart draws it."""
    _dpdk_or_skip()
    panel = perfkit.ui.Panel("DpdkFlows", port="ring:uir:0", peer="ring:uir:1", rate="20kpps", flows=4,
                             duration="4s", interval=0.25, redraw_s=0.2)
    assert panel.rate_row.layout.display == "none"
    assert not panel.set_live_rate("50kpps") and "no run is going" in panel.rate_status.value
    run = _start_at_once(panel)
    deadline = time.monotonic() + 30
    while panel.rate_row.layout.display != "":    # shown once run.start() has returned
        assert time.monotonic() < deadline and not run.done, run.error
        time.sleep(0.01)
    assert panel.rate_slider.value == pytest.approx(20_000, rel=0.01) and "target 20 kpps" in panel.rate_status.value
    t0 = _rows_past(run, 2)
    panel.rate_text.value = "fast"                 # as typed, then Enter: refused before the engine
    assert "⚠ set_rate: " in panel.rate_status.value and "cannot read" in panel.rate_status.value
    assert panel.rate_status.value.count("<span") == 1          # one line
    panel.rate_text.value = "50kpps"
    t1 = run.rows[-1]["time_s"]                    # every row up to here was sampled before the change
    assert "target 50 kpps" in panel.rate_status.value
    assert panel.rate_slider.value == pytest.approx(50_000, rel=0.01)   # the slider follows the box
    _rows_past(run, len(run.rows) + 4)
    panel.rate_slider.value = 30_000               # a slider move (continuous_update off: on release)
    t2 = run.rows[-1]["time_s"]
    assert "target 30 kpps" in panel.rate_status.value
    assert panel.wait(60) is run and run.error is None, run.error
    assert panel.rate_row.layout.display == "none"    # gone with the live run
    rows, s = run.rows, run.summary
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"] and s["lost"] == 0   # a ring pair: every frame arrives
    assert t0 <= t1 < t2
    assert all(r["rate_target"] == 20_000 for r in rows if r["time_s"] <= t1)
    assert all(r["rate_target"] == 50_000 for r in rows if t1 + 0.5 <= r["time_s"] <= t2)
    assert all(r["rate_target"] == 30_000 for r in rows if r["time_s"] >= t2 + 0.5)
    steps = [r["rate_target"] for i, r in enumerate(rows) if i == 0 or r["rate_target"] != rows[i - 1]["rate_target"]]
    assert steps == [20_000, 50_000, 30_000], steps   # nothing else reached the engine ("fast" did not)
    # the chart: the target as its own line beside what was sent, row for row
    fig = panel.dashboard.static()
    target = next(t for t in fig.data if t.name == "target pkt/s")
    shown = perfkit.ui.charts.plot_rows(run)
    assert list(target.y) == [r["rate_target"] for r in shown] and target.line.dash == "dash"
    assert "target pkt/s" not in _trace_names(perfkit.ui.charts.run_figure(
        perfkit.Run(perfkit.DpdkReflect(port="ring:uir:1"))))   # a reflector has no target


def test_dpdk_reflect_panel_receives_what_a_flows_panel_sends_over_a_ring_pair():
    _dpdk_or_skip()
    far = perfkit.ui.Panel("DpdkReflect", port="ring:uib:1", mode="rxonly", flows=4, duration="20s",
                           interval=0.25)
    near = perfkit.ui.Panel("DpdkFlows", port="ring:uib:0", rate="10kpps", flows=4, duration="1s",
                            interval=0.25)
    r_far = _start_at_once(far)
    deadline = time.monotonic() + 30
    while not r_far.roles:                      # the far port is open once the run has started
        assert time.monotonic() < deadline and not r_far.error, r_far.error
        time.sleep(0.02)
    r_near = _start_at_once(near)
    assert near.wait(60) is r_near and r_near.error is None
    far.stop()                                  # returns at once; the run ends with its final row
    assert far.wait(30) is r_far and r_far.error is None
    assert r_far.rows[-1]["time_s"] < 15
    sent, last = r_near.summary["pkts_tx"], r_far.rows[-1]
    assert sent == pytest.approx(10_000, rel=0.05)
    # every UDP frame arrived (the rest: the generator's ARP for its peer, answered)
    assert last["udp_rx"] == sent and last["arp_rx"] == 1 and last["pkts_rx"] == sent + 1
    assert r_far.summary["lost"] == 0 and r_far.summary["lat_count"] == sent
    assert "reordered/s" in _trace_names(far.dashboard.static())


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_load_and_http_serve_from_their_panels_with_the_http_charts():
    port = _free_port()
    server = perfkit.ui.Panel("HttpServe", port=port, size=200, duration="20s", interval=0.25)
    load = perfkit.ui.Panel("HttpLoad", url=f"http://127.0.0.1:{port}/", users=4, rate="400",
                            duration="1.5s", interval=0.25, redraw_s=0.2)
    s_run = _start_at_once(server)
    deadline = time.monotonic() + 30
    while not s_run.roles:
        assert time.monotonic() < deadline and not s_run.error, s_run.error
        time.sleep(0.02)
    l_run = _start_at_once(load)
    assert load.wait(60) is l_run and l_run.error is None, l_run.error
    server.stop()
    assert server.wait(30) is s_run and s_run.error is None, s_run.error
    s = l_run.summary
    assert s["tps"] == pytest.approx(400, rel=0.2) and s["http_2xx"] == s["responses"] > 300
    assert s["error_rate_pct"] == 0
    assert s_run.rows[-1]["http_req"] == s["requests"]      # the server saw every request
    names = _trace_names(load.dashboard.static())
    for want in ("responses/s (tps)", "p50 ms", "p99 ms", "failed requests/s", "connect errors/s",
                 "timeouts/s", "2xx/s", "5xx/s", "open now", "cpu % (all workers)"):
        assert want in names, (want, names)
    assert "tps" in load.status.value and "errors 0%" in load.status.value
    assert "requests/s" in _trace_names(server.dashboard.static())
    tps = next(t for t in load.dashboard.static().data if t.name == "responses/s (tps)")
    assert max(tps.y) > 200


def test_an_http_load_from_the_panel_on_a_cluster_shows_each_host_live(tmp_path):
    """The cluster picker: a real local cluster of two engines; the run's totals and a line per
    host while it runs and after; the server counted every request the hosts sent."""
    pytest.importorskip("ipyparallel")
    import os
    from perfkit.cluster import Cluster
    name = f"ui{os.getpid()}"
    with pytest.raises(ValueError, match=f"cluster: '{name}' is not up"):
        perfkit.ui.Panel("HttpLoad", url="http://127.0.0.1:1/", cluster=name)
    with pytest.raises(ValueError, match="cluster: HttpServe does not split"):
        perfkit.ui.Panel("HttpServe", cluster=name)
    c = Cluster.start(n=2, name=name)
    try:
        port = _free_port()
        server = perfkit.ui.Panel("HttpServe", port=port, size=200, duration="30s", interval=0.25)
        assert server.cluster_row is None   # a server does not split: no picker
        load = perfkit.ui.Panel("HttpLoad", url=f"http://127.0.0.1:{port}/", users=4, rate="400",
                                duration="2s", interval=0.25, redraw_s=0.2)
        assert load.cluster_box.value == "none" and name in load.cluster_box.options
        load.cluster_box.value = name
        assert load.cluster_name == name
        s_run = _start_at_once(server)
        deadline = time.monotonic() + 30
        while not s_run.roles:
            assert time.monotonic() < deadline and not s_run.error, s_run.error
            time.sleep(0.02)
        run = _start_at_once(load)
        live, drawn = [], set()
        while not run.done and time.monotonic() < deadline + 60:
            if "e0" in load.hosts_box.value and "e1" in load.hosts_box.value and "transactions" in load.hosts_box.value:
                live.append(load.hosts_box.value)
            dash = load.dashboard
            if dash is not None and dash._figure is not None and not dash.finished:   # the live chart: a line per host
                drawn |= {t.name for t in dash._figure.data if t.name.startswith(("e0:", "e1:")) and len(t.y or ())}
            time.sleep(0.05)
        assert load.wait(60) is run and run.error is None, run.error
        server.stop()
        assert server.wait(30) is s_run
        assert live, "no per-host line while the run was going"
        assert drawn == {"e0: responses/s (tps)", "e1: responses/s (tps)"}, drawn
        s = run.summary
        assert set(run.hosts) == {"e0", "e1"} and s["tps"] > 0   # paced at 400/s: no rate asserted on a loaded machine
        assert s["responses"] == sum(h["responses"] for h in run.hosts.values()) == s_run.rows[-1]["http_req"]
        done = load.hosts_box.value   # each host's summary once it has ended, and the start skew
        assert "per host (2 hosts, start skew" in done and "e0" in done and "e1" in done and "⚠" not in done
        assert "tps" in load.status.value and "finished" in load.status.value
        load.cluster_box.value = "none"   # back to this host: a run with no per-host lines
        back = perfkit.load(run.save(tmp_path / "c.parquet"))
        assert back.host_frame.equals(run.host_frame)
        for r in (run, back):   # the static figure too: each host's line sums to the host's responses
            hosts = {t.name.split(":")[0]: t for t in perfkit.ui.charts.run_figure(r).data if ": " in t.name}
            assert set(hosts) == {"e0", "e1"}
            frame = r.host_frame
            for h, t in hosts.items():
                mine = frame.filter(frame["host"] == h)
                assert len(t.y) >= 2 and sum((mine["http_resp_per_s"] * mine["interval_s"]).to_list()) == pytest.approx(
                    r.hosts[h]["responses"], rel=1e-6)
    finally:
        c.down()
    assert name not in load.refresh_clusters()


def test_remote_test_from_the_panel_against_a_perfkit_server():
    with serving() as srv:
        panel = perfkit.ui.Panel("RemoteTest", test="tcp_lat", port=srv.port, duration="1s", interval=0.25)
        run = _start_at_once(panel)
        assert panel.wait(60) is run and run.error is None, run.error
        assert run.summary["lat_count"] > 100 and "rem_cpus_used" in run.summary
        assert "latency" in panel.status.value and "finished" in panel.status.value
        assert "p99 µs" in _trace_names(panel.dashboard.static())


def test_a_run_that_cannot_start_says_why_in_the_panel_and_start_comes_back():
    port = _free_port()                          # nobody listens there
    panel = perfkit.ui.Panel("RemoteTest", test="tcp_bw", port=port, duration="1s", wait_server=0)
    run = _start_at_once(panel)
    assert panel.wait(30) is run
    assert run.error and "could not start" in run.error and "cannot reach perfkit serve" in run.error
    assert "⚠ could not start" in panel.status.value
    assert not panel.running and not panel.start_button.disabled and panel.stop_button.disabled
    assert "did not start" in panel.output.outputs[0]["data"][PLOTLY]["layout"]["title"]["text"]


def test_stop_while_starting_ends_the_run_as_soon_as_it_starts():
    panel = perfkit.ui.Panel(test="udp_bw", rate="5kpps", duration="30s", interval=0.2)
    run = panel.start()
    panel.stop()                                 # may come before the engine has even started
    assert panel.wait(30) is run and run.done and run.error is None
    assert run.rows[-1]["time_s"] < 5


def test_the_launcher_has_every_specs_panel_in_a_tab_and_runs_from_any():
    launcher = perfkit.ui.Launcher(interval=0.25)
    assert tuple(launcher.widget.titles) == tuple(SPECS) + ("Lab",)
    launcher.widget.selected_index = len(SPECS)
    assert launcher.current is launcher.lab
    launcher.widget.selected_index = 0
    assert [type(p.spec) for p in launcher.panels.values()] == list(SPECS.values())
    assert launcher.current is launcher["LocalTest"]
    launcher.widget.selected_index = list(SPECS).index("HttpServe")
    assert launcher.current is launcher["HttpServe"]
    with pytest.raises(ValueError, match="spec_cls: 'Nope' is not one of LocalTest"):
        perfkit.ui.Launcher(["LocalTest", "Nope"])
    panel = launcher["LocalTest"].set(test="udp_lat", duration="0.5s")
    run = panel.start()
    assert panel.wait(30) is run and run.summary["lat_count"] > 0
    assert launcher["HttpServe"].run is None          # each tab has its own run


def test_dpdk_http_server_and_client_from_their_panels_with_dperfs_charts():
    _dpdk_or_skip()
    if not perfkit.engines().get("dpdk_tcp", {}).get("available"):
        pytest.skip("the dpdk_tcp engine is not available here")
    server = perfkit.ui.Panel("DpdkHttpServer", port="ring:uic:1", payload_size=200, duration="20s",
                              interval=0.25)
    client = perfkit.ui.Panel("DpdkHttpClient", port="ring:uic:0", cps="1k", duration="1.5s",
                              interval=0.25, redraw_s=0.2)
    assert server.engine_name == client.engine_name == "dpdk_tcp"
    assert client.spec.clients == (("198.18.0.1", 1),) and client.spec.lport_range == (1024, 65535)
    s_run = _start_at_once(server)
    deadline = time.monotonic() + 30
    while not s_run.roles:
        assert time.monotonic() < deadline and not s_run.error, s_run.error
        time.sleep(0.02)
    c_run = _start_at_once(client)
    assert client.wait(60) is c_run and c_run.error is None, c_run.error
    server.stop()
    assert server.wait(30) is s_run and s_run.error is None, s_run.error
    c, srv = c_run.rows[-1], s_run.rows[-1]
    assert c["sock_open"] == pytest.approx(1500, rel=0.2) and c["http_2xx"] == c["http_resp"] == c["sock_open"]
    assert srv["http_get"] == c["http_req"] and srv["sock_open"] == c["sock_open"]   # every one served
    names = _trace_names(client.dashboard.static())
    for want in ("opened/s", "responses/s", "open now", "p99 ms", "retransmits/s", "RST rx/s",
                 "cpu % (all workers)"):
        assert want in names, (want, names)
    opened = next(t for t in client.dashboard.static().data if t.name == "opened/s")
    assert max(opened.y) > 500
    assert re.search(r"finished: [\d.]+ k?conn/s, [\d.]+ k?req/s, response p50 .*, 0 errors", client.status.value), \
        client.status.value
    assert "dpdk http server 198.18.0.2:80 on ring:uic:1" in server.message.value


# ------------------------------------- rate search and sweeps from the panels (real runs)
def _points_of(fig, name):
    trace = next(t for t in fig.data if t.name == name)
    return list(trace.x), list(trace.y)


def test_the_search_mode_checks_its_fields_with_the_searchs_own_code():
    from perfkit import ratesearch
    panel = perfkit.ui.Panel(test="udp_bw", rate="100kpps")
    assert panel.tasks == ("run", "search") and panel.task == "run"
    assert panel.sections["search"].layout.display == "none"           # hidden in the run mode
    panel.set(task="search")
    assert panel.sections["search"].layout.display == "" and panel.error is None
    assert "rate search zero-loss" in panel.message.value and "upper bound 100 kpps" in panel.message.value
    # the defaults are search()'s own
    import inspect
    sig = inspect.signature(ratesearch.search).parameters
    for name in ("criterion", "trial", "resolution", "max_trials", "settle", "retries"):
        assert panel.task_values()[name] == sig[name].default, name
    for field, value in [("criterion", "pdr:200%"), ("criterion", "lat:p42<1us"), ("trial", "10ms"),
                         ("low", "1Mpps"), ("resolution", "150%"), ("max_trials", 0), ("retries", 9),
                         ("settle", "2m")]:
        panel.set(**{field: value})
        assert panel.spec is None and panel.start_button.disabled
        with pytest.raises(ValueError) as exc:        # the same message as perfkit.search / the CLI
            ratesearch.validate(LocalTest(), **panel.task_values(), high=LocalTest(rate="100kpps").rate)
        assert panel.error == str(exc.value) and panel.error.startswith(f"{field}:")
        assert "⚠" in panel.task_labels["search"][field].value
        panel.set(**{field: {"criterion": "zero-loss", "low": "", "trial": "1s", "resolution": "1%",
                             "max_trials": 16, "retries": 0, "settle": "0.5s"}[field]})
        assert panel.error is None, panel.error
    panel.set(test="tcp_lat")                          # the socket engine searches udp_bw only
    assert panel.error.startswith("search: the socket engine searches udp_bw only")
    panel.set(test="udp_bw", rate="fast")
    assert panel.error.startswith("rate:") and "⚠" in panel.labels["rate"].value
    panel.set(rate="", task="run")                     # back to one run: the search fields do not count
    panel.set(task="search", criterion="nope")
    panel.set(task="run")
    assert panel.error is None


def test_a_rate_search_from_the_panel_draws_each_trial_live_and_gives_the_trials():
    """A real search on loopback: udp_bw, every engine worker below 20% of a core. 400 kpps
    needs far more than that (or cannot be sent at all here), 4 kpps far less, so the
    search has passes and failures; every pass lies below every failure."""
    panel = perfkit.ui.Panel(test="udp_bw", size=64, rate="400kpps", redraw_s=0.1)
    panel.set(task="search", criterion="cpu:20%", trial="0.3s", settle="0.1s", resolution="30%", max_trials=5)
    assert panel.error is None, panel.error
    chart = _start_at_once(panel)
    seen = []
    while not chart.finished:                          # the live figure gains points as trials end
        fig = chart._figure
        if fig is not None:
            seen.append(sum(len(fig.data[i].x) for i in (0, 1)))
        time.sleep(0.05)
    res = panel.wait(60)
    assert res is panel.result and panel.job_error is None and res.error is None, (panel.job_error, res.error)
    frame = panel.frame
    assert frame.height == len(res.rows) >= 2 and frame.equals(res.trials)
    assert len({n for n in seen if n}) >= 2, seen   # points arrived one by one, not all at the end
    assert chart.draw_threads == {chart._thread.ident} and threading.get_ident() not in chart.draw_threads
    # real trials: frames sent and received, the workers' CPU measured
    assert (frame["sent"] > 0).all() and (frame["rx_pps"] > 0).all() and (frame["cpu_pct_max_worker"] > 0).all()
    assert frame["offered_pps"][0] == 400_000 and not frame["passed"][0]
    passed = frame.filter(polars.col("passed"))["offered_pps"].to_list()
    failed = frame.filter(~polars.col("passed") & polars.col("counted"))["offered_pps"].to_list()
    assert passed and failed and max(passed) < min(failed)
    assert res.found_pps == max(passed)
    # the static figure is the trials: offered (pass / fail), received, the rate found
    fig = chart.static()
    assert type(fig).__name__ == "Figure"
    ok_x, ok_y = _points_of(fig, "offered: passed")
    bad_x, bad_y = _points_of(fig, "offered: failed")
    assert sorted(ok_y) == sorted(passed) and sorted(bad_x + ok_x) == frame["trial"].to_list()
    assert _points_of(fig, "received")[1] == frame["rx_pps"].to_list()
    assert _points_of(fig, "found")[1] == [res.found_pps] * 2
    assert _points_of(fig, "bound")[1] == [20.0, 20.0]
    cpu_x, cpu_y = _points_of(fig, "passed")
    assert sorted(cpu_y) == sorted(frame.filter(polars.col("passed"))["cpu_pct_max_worker"].to_list())
    data = panel.output.outputs[0]["data"]
    assert WIDGET not in data and PLOTLY in data and "found" in data[PLOTLY]["layout"]["title"]["text"]
    assert "finished: found" in panel.status.value and "kpps" in panel.status.value
    assert not panel.running and not panel.start_button.disabled


def test_stop_ends_a_search_at_once_and_keeps_no_cut_short_trial():
    panel = perfkit.ui.Panel(test="udp_bw", rate="20kpps", redraw_s=0.1)
    panel.set(task="search", criterion="zero-loss", trial="20s")
    chart = _start_at_once(panel)
    time.sleep(1.0)                                    # the first trial is going
    t0 = time.monotonic()
    panel.stop()
    assert time.monotonic() - t0 < 0.1
    res = panel.wait(30)
    assert time.monotonic() - t0 < 10
    assert res.stopped == "stopped" and res.rows == [] and res.found_pps is None
    assert chart.finished and panel.frame.height == 0 and "nothing passed" in panel.status.value


def test_a_rate_search_of_dpdk_flows_from_the_panel():
    _dpdk_or_skip()
    panel = perfkit.ui.Panel("DpdkFlows", port="ring:uis:0", peer="ring:uis:1", rate="100kpps", flows=4,
                             redraw_s=0.1)
    panel.set(task="search", criterion="zero-loss,lat:p99<100ms", trial="0.3s", settle="0.1s")
    assert panel.error is None, panel.error
    _start_at_once(panel)
    res = panel.wait(60)
    assert res.error is None and res.stopped == "held at the upper bound", res
    row = panel.frame.row(0, named=True)
    assert row["passed"] and row["lost"] == 0 and row["sent"] == pytest.approx(30_000, rel=0.05)
    assert row["received"] == row["sent"] and row["lat_count"] > 0
    assert _points_of(panel.dashboard.static(), "offered: passed") == ([1], [100_000.0])


def test_the_sweep_field_uses_the_clis_parser_and_checks_every_point():
    from perfkit import remote
    panel = perfkit.ui.Panel("RemoteTest", test="udp_lat")
    assert panel.tasks == ("run", "sweep")
    panel.set(task="sweep", sweep="msg_size:1:4K:*4")
    assert panel.error is None and "7 points" in panel.message.value   # 1 4 16 64 256 1K 4K
    for bad in ("msg_size:1:4K", "size:1:4K:*2", "msg_size:1:4K:/2", "msg_size:8:4:*2", "msg_size:1:4K:*1"):
        panel.set(sweep=bad)
        with pytest.raises(ValueError) as exc:
            remote.parse_sweep(bad)                     # the CLI's --oo parser, the same message
        assert panel.error == str(exc.value) and panel.start_button.disabled
        assert "⚠" in panel.task_labels["sweep"]["sweep"].value
    panel.set(sweep="msg_size:1K:128K:*2")             # a point udp_lat cannot take
    assert panel.error.startswith("sweep: size:") and panel.start_button.disabled
    panel.set(sweep="rate:10kpps:30kpps:+10kpps", also=["tcp_lat", "udp_bw"])
    assert panel.error is None and "of udp_lat, tcp_lat, udp_bw" in panel.message.value


def test_a_sweep_from_the_panel_against_perfkit_serve_with_conf_and_quit():
    import subprocess
    import sys
    srv = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "serve", "--port", "0"],
                           stderr=subprocess.PIPE, text=True)
    try:
        port = int(srv.stderr.readline().rsplit("port", 1)[1].split()[0])
        panel = perfkit.ui.Panel("RemoteTest", test="tcp_bw", port=port, duration="0.4s", redraw_s=0.1)
        panel.set(task="sweep", sweep="msg_size:1K:16K:*4", also=["tcp_lat"])
        assert panel.error is None and "6 points" in panel.message.value
        chart = _start_at_once(panel)
        seen = []
        while not chart.finished:
            fig = chart._figure
            if fig is not None:
                seen.append(len(fig.data[0].x) + len(fig.data[4].x))
            time.sleep(0.05)
        frame = panel.wait(60)
        assert panel.job_error is None, panel.job_error
        assert frame is panel.frame and frame.height == 6
        assert len({n for n in seen if n}) >= 2, seen   # points drawn as they finished
        assert frame["test"].to_list() == ["tcp_bw"] * 3 + ["tcp_lat"] * 3
        assert frame["msg_size"].to_list() == [1024, 4096, 16384] * 2
        assert (frame["rx_bps"] > 0).all() and (frame["bytes_rx"] > 0).all() and "rem_cpus_used" in frame.columns
        lat = frame.filter(polars.col("test") == "tcp_lat")
        assert (lat["latency_us"] > 0).all() and (lat["lat_count"] > 0).all()
        fig = chart.static()
        bw_x, bw_y = _points_of(fig, "tcp_bw bandwidth")
        assert bw_x == [1024, 4096, 16384] and bw_y == frame.filter(polars.col("test") == "tcp_bw")["rx_bps"].to_list()
        assert _points_of(fig, "tcp_lat latency (half round trip)")[1] == lat["latency_us"].to_list()
        assert fig.layout.xaxis.type == "log"
        assert PLOTLY in panel.output.outputs[0]["data"] and "finished: 6 points" in panel.status.value
        # perfkit test HOST conf / quit, from the same panel
        panel.conf()
        deadline = time.monotonic() + 30
        while "rem_kernel" not in panel.info.value:
            assert time.monotonic() < deadline and "⚠" not in panel.info.value, panel.info.value
            time.sleep(0.05)
        assert "loc_node" in panel.info.value
        panel.quit_server()
        assert srv.wait(timeout=30) == 0
        assert "stopped" in panel.info.value
    finally:
        srv.kill()


def test_stop_ends_a_sweep_and_keeps_the_points_that_finished():
    with serving() as srv:
        panel = perfkit.ui.Panel("RemoteTest", test="tcp_lat", port=srv.port, duration="0.3s", redraw_s=0.1)
        panel.set(task="sweep", sweep="msg_size:1:1K:*2")    # 11 points
        chart = _start_at_once(panel)
        deadline = time.monotonic() + 30
        while len(chart.rows) < 2:
            assert time.monotonic() < deadline and not chart.finished
            time.sleep(0.02)
        panel.stop()
        frame = panel.wait(30)
        assert 2 <= frame.height < 11 and frame["msg_size"].to_list() == [1, 2, 4, 8, 16, 32, 64][:frame.height]
        assert (frame["lat_count"] > 0).all()


def test_serve_here_starts_a_perfkit_server_in_this_kernel_for_the_panel():
    panel = perfkit.ui.Panel("RemoteTest", test="udp_lat", port=0, duration="0.5s", interval=0.25)
    srv = panel.serve()
    try:
        assert srv is not None and srv.port > 0 and panel.spec.port == srv.port     # the free port, in the form
        assert f"port {srv.port}" in panel.info.value and panel.serve_button.description == "stop server"
        run = _start_at_once(panel)
        assert panel.wait(30) is run and run.error is None, run.error
        assert run.summary["lat_count"] > 100 and "rem_cpus_used" in run.summary
        other = perfkit.ui.Panel("RemoteTest", port=srv.port)
        assert other.serve() is None and "⚠ serve:" in other.info.value       # the port is taken
    finally:
        panel.serve(stop=True)
    assert panel.server is None and panel.serve_button.description == "serve here"


def test_a_dperf_conf_fills_the_dpdk_http_panels(tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text("mode client\ncpu 0\nduration 3s\ncps 2k\nslow_start 10\nport ring:uid:0 198.18.0.1 198.18.0.2\n"
                    "client 198.18.0.1 1\nserver 198.18.0.2 1\nlisten 8080 1\nhttp_path /x\n")
    panel = perfkit.ui.Panel("DpdkHttpClient")
    spec = panel.load_dperf(str(conf))
    assert spec is not None and panel.error is None and panel.spec == spec == specs.from_dperf(str(conf))
    assert panel.spec.cps == 2000 and panel.spec.listen == 8080 and panel.spec.http_path == "/x"
    assert "loaded" in panel.info.value
    server = perfkit.ui.Panel("DpdkHttpServer")
    assert server.load_dperf(str(conf)) is None and "open it in the DpdkHttpClient panel" in server.info.value
    assert perfkit.ui.Panel("DpdkHttpServer").load_dperf(str(tmp_path / "none.conf")) is None


def test_eal_options_in_the_dpdk_panels_are_checked_and_cannot_change_a_running_eal():
    _dpdk_or_skip()
    from perfkit.engines import dpdk
    panel = perfkit.ui.Panel("DpdkFlows", port="ring:uie:0", peer="ring:uie:1", rate="10kpps", duration="0.3s",
                             interval=0.1)
    now = dpdk.eal_options()
    assert panel.eal_options() == now                 # the form shows what EAL starts (or started) with
    for field, value in [("memory_mb", 10), ("worker_cpus", "x")]:
        panel.set(**{field: value})
        assert panel.error.startswith(f"{field}:") and panel.start_button.disabled
        assert "⚠" in panel.task_labels["eal"][field].value
        panel.set(memory_mb=now.memory_mb, worker_cpus="")
    assert panel.error is None
    dpdk.eal()                                        # EAL up (if an earlier test has not started it)
    panel.set(memory_mb=now.memory_mb + 64)          # other options: EAL cannot take them any more
    panel._click_start(None)
    assert panel.run is None and "already up" in panel.status.value and "restart" in panel.status.value
    panel.set(memory_mb=now.memory_mb)
    run = _start_at_once(panel)
    assert panel.wait(30) is run and run.error is None and run.summary["pkts_tx"] > 0


def test_the_lab_panel_checks_with_labs_own_code_and_makes_impairs_and_removes_a_lab():
    from perfkit.lab import Lab, have_privileges, status
    lp = perfkit.ui.LabPanel(delay="5ms")
    assert lp.error is None and "delay 5ms" in lp.message.value.replace(" ", " ")
    for field, value in [("delay", "soon"), ("loss", "200%"), ("hosts", 1), ("name", "Bad-Name"), ("mtu", 10)]:
        lp.set(**{field: value})
        with pytest.raises(ValueError) as exc:
            Lab(**lp.values())
        assert lp.error == str(exc.value) and lp.buttons["up"].disabled
        assert "⚠" in lp.labels[field].value
        lp.set(**{field: {"delay": "5ms", "loss": "", "hosts": 2, "name": "", "mtu": 1500}[field]})
    assert lp.error is None and not lp.buttons["up"].disabled and lp.buttons["down"].disabled
    if not have_privileges():
        pytest.skip("a lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
    lp.up()
    assert lp.wait(60) and lp.lab is not None and lp.lab.is_up, lp.line.value
    try:
        name = lp.lab.name
        assert name in lp.info.value and "up" in lp.line.value
        assert [s for s in status() if s["name"] == name][0]["status"] == "up"
        assert lp.lab.impairments[0].delay == pytest.approx(0.005)
        # a test panel runs across it: udp_lat from h1 to h2, 5 ms each way
        panel = perfkit.ui.Panel(test="udp_lat", lab=name, duration="0.5s", interval=0.25)
        run = panel.start()
        assert panel.wait(60) is run and run.error is None, run.error
        assert run.summary["lat_p50_us"] > 10_000          # a round trip: two 5 ms delays
        lp.set(delay="", loss="1%").impair()
        assert lp.wait(60) and "loss 1%" in lp.line.value.replace(" ", " "), lp.line.value
        assert lp.lab.impairments[0].delay == 0 and lp.lab.impairments[0].loss == pytest.approx(1.0)
    finally:
        lp.down()
        assert lp.wait(60)
    assert lp.lab is None and "down" in lp.line.value
    assert not [s for s in status() if s["name"] == name]


# ------------------------------------------- progress, live figures, results (issue 28)
def test_a_panel_run_shows_progress_then_results_in_human_units_and_exports_that_load_back(tmp_path):
    import polars as pl
    from perfkit.ui import charts, results
    from perfkit.units import human
    panel = perfkit.ui.Panel(test="udp_bw", rate="20kpps", duration="1.5s", interval=0.2, redraw_s=0.2)
    run = panel.start()
    assert panel.progress_row.layout.display == "" and panel.progress.value == 0.0
    assert panel.wait(60) is run and not run.error
    # the run ended on its own: the bar is full, the text says elapsed of planned
    assert panel.progress.value == 1.0 and panel.progress.bar_style == "success"
    assert "1.5 / 1.5 s" in panel.progress_text.value
    # the results table: the summary's figures as people read them
    s = run.summary
    table = panel.results.table.value
    shown = list(zip(re.findall(r">([^<>]+)</th>", table), re.findall(r"<b>([^<>]+)</b>", table)))
    for pair in (("received", human(s["rx_pps"], "pps")), ("loss", human(s["loss_pct"], "%")),
                 ("p99", human(s["lat_p99_us"], "µs")), ("CPU", human(s["cpu_pct"], "%"))):
        assert (pair[0], html_escape(pair[1])) in shown, (pair, shown)
    assert "e+" not in table and "e-0" not in table                  # no raw floats
    # the live figures a socket run shows, from one of its rows
    figs = dict(results.live_figures(run.spec, run.rows[2]))
    assert list(figs) == ["received", "loss", "p99", "errors", "CPU"]
    assert figs["received"] == human(run.rows[2]["pkts_rx_per_s"], "pps")
    # the finished chart: plotly's own HTML beside the plotly JSON, the live widget gone
    data = panel.output.outputs[0]["data"]
    assert PLOTLY in data and WIDGET not in data and 'class="plotly-graph-div"' in data["text/html"]
    # no cliff to zero: traffic ran to the end, so the last plotted receive rate is about the offered rate
    rx = next(t for t in panel.dashboard.static().data if t.name == "rx pkt/s")
    assert rx.y[-1] > 10_000, list(rx.y)
    assert rx.x[-1] == charts.plot_rows(run)[-1]["time_s"]
    # Save, CSV, Parquet, HTML report: files that load back equal
    res = panel.results
    res.folder = tmp_path
    stored = perfkit.Store(tmp_path / "runs").load(res.save())
    assert stored.frame.equals(run.frame) and stored.summary == run.summary
    assert pl.read_csv(res.export_csv(), schema=run.frame.schema).equals(run.frame)
    assert pl.read_parquet(res.export_parquet()).equals(run.frame)
    assert "plotly" in (tmp_path / res.report().rsplit("/", 1)[1]).read_text()
    assert "report written" in res.message.value
    # a button does the same in a thread of its own and says where it wrote
    (tmp_path / "clicked").mkdir()
    res.folder = tmp_path / "clicked"
    res.buttons[1].click()
    deadline = time.monotonic() + 30
    while not list((tmp_path / "clicked").glob("*.csv")) and time.monotonic() < deadline:
        time.sleep(0.05)
    [csv] = (tmp_path / "clicked").glob("*.csv")
    assert pl.read_csv(csv, schema=run.frame.schema).equals(run.frame)
    # the next run's start closes these widgets: none stays in a saved notebook's widget state
    panel._drop_results()
    assert panel.results is None and res.widget.comm is None and res.buttons[0].comm is None


def test_chart_rows_drop_the_drain_and_fold_a_partial_last_row():
    from perfkit.ui import charts
    full = [{"time_s": float(t), "interval_s": 1.0, "pkts_rx_per_s": 1000.0, "pkts_rx": 1000 * t,
             "cpu_pct": 50.0, "lat_p99_us": 20.0} for t in range(1, 6)]
    drain = {"time_s": 6.0, "interval_s": 1.0, "pkts_rx_per_s": 3.0, "pkts_rx": 5003, "cpu_pct": 1.0,
             "lat_p99_us": 900.0}
    tail = {"time_s": 6.02, "interval_s": 0.02, "pkts_rx_per_s": 0.0, "pkts_rx": 5003, "cpu_pct": 0.0,
            "lat_p99_us": None}
    shown = charts.chart_rows([*full, drain, tail], interval=1.0, duration=5.0)
    assert shown == full                                   # the drain after the planned 5 s is not plotted
    # stopped at 3.3 s of 10: the partial last row is folded into the one before, time-weighted
    part = {"time_s": 3.3, "interval_s": 0.3, "pkts_rx_per_s": 2000.0, "pkts_rx": 3600, "cpu_pct": 100.0,
            "lat_p99_us": 50.0}
    shown = charts.chart_rows([*full[:3], part], interval=1.0, duration=10.0)
    assert shown[:2] == full[:2] and len(shown) == 3
    last = shown[-1]
    assert last["time_s"] == 3.3 and last["interval_s"] == pytest.approx(1.3) and last["pkts_rx"] == 3600
    assert last["pkts_rx_per_s"] == pytest.approx((1000 * 1.0 + 2000 * 0.3) / 1.3)
    assert last["cpu_pct"] == pytest.approx((50 * 1.0 + 100 * 0.3) / 1.3)
    assert last["lat_p99_us"] == 20.0                      # from the row with the samples
    # the planned end inside a row (ticks at 1.4 and 1.6 s, 1.5 s planned): its rates over its traffic part
    mid = {"time_s": 1.6, "interval_s": 0.2, "pkts_rx_per_s": 10_000.0, "pkts_rx": 30_000, "cpu_pct": 25.0}
    rows = [{"time_s": 1.4, "interval_s": 0.2, "pkts_rx_per_s": 20_000.0, "pkts_rx": 28_000, "cpu_pct": 50.0},
            mid, {**tail, "time_s": 1.72, "interval_s": 0.12}]
    shown = charts.chart_rows(rows, interval=0.2, duration=1.5)
    assert shown[-1]["time_s"] == 1.5 and shown[-1]["pkts_rx"] == 30_000   # (folded or not: 0.1 s is half a row)
    assert shown[-1]["pkts_rx_per_s"] == pytest.approx(20_000) and shown[-1]["cpu_pct"] == pytest.approx(50)
    # a run of one short row keeps it
    assert charts.chart_rows([part], interval=1.0, duration=10.0) == [part]


def test_chart_axes_carry_units_whole_number_ticks_for_counts_and_say_none_when_empty():
    from perfkit.ui import charts
    assert [charts.axis_unit(t) for t, _, _ in charts.PANELS] == [
        "packets/s", "bits/s", "µs", "%", "errors/s", "% of one core"]
    assert charts.axis_unit("bits/s (frames, FCS counted)") == "bits/s"
    assert charts.axis_unit("concurrent connections") == "connections"
    panels = charts.HTTP_PANELS
    fig = charts.empty_figure("t", panels)
    rows = [{"time_s": float(t), "interval_s": 1.0, "http_resp_per_s": 1500.0 + t, "sock_current": t % 3,
             "sock_open_per_s": 0.0} for t in range(1, 5)]
    x, ys = charts.columns(rows, panels)
    for trace, y in zip(fig.data, ys):
        trace.x, trace.y = x, y
    charts.fit_axes(fig, panels, ys, static=True)
    axis = {title: fig.layout["yaxis" + (str(p + 1) if p else "")] for p, (title, _, _) in enumerate(panels)}
    assert axis["connections"].dtick == 1                  # 0, 1, 2 open: no "0.5 connections"
    assert axis["transactions/s"].dtick is None            # rates keep plotly's own ticks
    assert axis["errors/s"].range == (0, 1) and axis["errors/s"].showticklabels is False
    assert axis["response time (ms)"].title.text == "ms"
    assert sum(a.text == "none" for a in fig.layout.annotations) == 3   # errors, status, CPU: nothing drawn


# ------------------------------------------------------------------ the HTTP panel's user ladder
@pytest.fixture
def http_server_port():
    from perfkit._sock import SockEngine
    from perfkit.kinds.http import http_workers
    eng = SockEngine(http_workers(specs.HttpServe(port=0, size=100, duration=60)))
    eng.start()
    yield eng.bound_port(0)
    eng.stop()
    eng.join()
    eng.close()


def test_the_http_panel_offers_a_user_ladder_checked_by_the_ladders_own_code():
    panel = perfkit.ui.Panel("HttpLoad", url="http://127.0.0.1:9/")
    assert panel.tasks == ("run", "ladder") and panel.sections["ladder"].layout.display == "none"
    panel.set(task="ladder", ladder="10:40:+10")
    assert panel.error is None and "user ladder 10, 20, 30, 40 of http GET" in panel.message.value, panel.message.value
    assert "10 users" not in panel.message.value   # the form's users are not the ladder's
    for bad, says in (("10:5:+1", "ladder: '10:5:+1': FROM (10) is above TO (5)"), ("x", "ladder: 'x'"),
                      ("0,5", "ladder: '0,5': 0 is out of range")):
        panel.set(ladder=bad)
        assert panel.error.startswith(says) and panel.start_button.disabled, panel.error
        assert "⚠" in panel.task_labels["ladder"]["ladder"].value
    panel.set(ladder="4,8", thresholds="p99<nope")
    assert panel.error.startswith("threshold:") and panel.start_button.disabled
    panel.set(thresholds="", stages="1s:5")          # a stage plan sets its own users: no ladder of it
    assert panel.error.startswith("ladder: a ladder runs steps of fixed users")
    panel.set(stages="", task="run")
    assert panel.error is None


def test_a_user_ladder_from_the_panel_draws_each_step_and_gives_the_ladder(http_server_port):
    panel = perfkit.ui.Panel("HttpLoad", url=f"http://127.0.0.1:{http_server_port}/", duration="0.5s",
                             redraw_s=0.1)
    panel.set(task="ladder", ladder="1,2,4", thresholds="error_rate<1% tps>1")
    assert panel.error is None, panel.error
    chart = _start_at_once(panel)
    lad = panel.wait(60)
    from perfkit.ladder import Ladder
    assert isinstance(lad, Ladder) and panel.job_error is None, panel.job_error
    assert lad.users == [1, 2, 4] and lad.passed is True and panel.frame.equals(lad.table)
    assert panel.frame["users"].to_list() == [1, 2, 4] and (panel.frame["tps"] > 0).all()
    fig = chart.static()   # one point per step, in every chart: TPS, mean test time, error rate
    assert [list(t.x) for t in fig.data] == [[1, 2, 4]] * 3
    assert list(fig.data[0].y) == pytest.approx(lad.table["tps"].to_list())
    assert list(fig.data[2].y) == [0.0, 0.0, 0.0]
    assert "finished: 3 steps, every threshold held" in panel.status.value
    assert not panel.running and not panel.start_button.disabled
