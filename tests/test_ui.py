"""The notebook front door: the Panel generated from a spec, the live Dashboard,
and a real kernel staying responsive while a run is live."""
import dataclasses
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
from perfkit.spec import LOCAL_TESTS  # noqa: E402

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
    for name in ("size", "rate", "duration", "host"):
        assert kinds[name] is ipywidgets.Text, name
    for name in ("flows", "port", "batch", "gso"):
        assert kinds[name] is ipywidgets.IntText, name
    assert kinds["busy_poll"] is ipywidgets.Checkbox
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
    panel.inputs["busy_poll"].value = True
    assert not panel.start_button.disabled
    assert panel.spec == LocalTest("tcp_lat", rate="10kpps", duration="1s", busy_poll=True)


def test_panel_starts_from_a_spec_instance():
    spec = LocalTest("udp_lat", size=32, duration="3s")
    panel = perfkit.ui.Panel(spec)
    assert panel.spec == spec
    with pytest.raises(ValueError, match="colour: unknown field"):
        perfkit.ui.Panel(colour="red")


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
    # the static figure has every row: one point per row in every trace
    fig = dash.static()
    assert type(fig).__name__ == "Figure"
    for trace in fig.data:
        assert len(trace.x) == len(rows), trace.name
    tx = next(t for t in fig.data if t.name == "tx pkt/s")
    assert list(tx.x) == [r["time_s"] for r in rows]
    assert list(tx.y) == [r["pkts_tx_per_s"] for r in rows]
    # and it replaced the live widget where it was shown
    data = out.outputs[0]["data"]
    assert WIDGET not in data and PLOTLY in data
    assert len(data[PLOTLY]["data"][0]["x"]) == len(rows)
    assert "finished" in data[PLOTLY]["layout"]["title"]["text"]


def test_dashboard_of_a_finished_or_loaded_run_is_static(tmp_path):
    run = perfkit.run(LocalTest("tcp_lat", duration="0.5s"), interval=0.1)
    back = perfkit.load(run.save(tmp_path / "r.parquet"))
    dash = perfkit.ui.Dashboard(back)
    assert dash.wait(30)
    assert [len(t.x) for t in dash.static().data] == [len(back.rows)] * len(dash.static().data)
    hist = perfkit.ui.histogram_figure(back)
    assert sum(hist.data[0].y) == pytest.approx(100.0)


def test_dashboard_attached_to_a_running_run_gets_the_earlier_rows_too():
    run = perfkit.Run(LocalTest("udp_bw", rate="20kpps", duration="1s"), interval=0.1).start()
    time.sleep(0.45)
    dash = perfkit.ui.Dashboard(run, redraw_s=0.2)
    assert dash.wait(30) and run.done
    assert [r["time_s"] for r in run.rows] == list(dash.static().data[0].x)
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
    assert "finished" in panel.status.value
    assert PLOTLY in panel.output.outputs[0]["data"]     # the static chart under the form


# ----------------------------------------------------------------- a real kernel
def test_a_kernel_runs_other_cells_while_a_run_is_live(tmp_path):
    """Start from a cell, then execute more cells while the run and its dashboard
    draw from background threads (ipykernel >= 7.1); no errors from those threads."""
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
             "p = perfkit.ui.Panel(test='udp_bw', duration='3s', interval=0.5)\n"
             "display(p)")
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
        assert statistics.median(dt for dt, _ in rounds) < 0.1, rounds
        assert max(dt for dt, _ in rounds) < 1.0, rounds
        _, text = cell("p.wait(30); d = p.dashboard\n"
                       "print(r.done, len(r.rows), d.draw_threads == {d._thread.ident}, d.redraws)")
        done, nrows, one_thread, redraws = text.split()
        assert done == "True" and int(nrows) >= 5 and one_thread == "True" and int(redraws) >= 1
        # show(): a live chart in the cell's output, replaced by a static figure at the end
        cell("d = perfkit.ui.show(perfkit.LocalTest('tcp_lat', duration='1s'))")
        _, text = cell("print(d.wait(30), d.run.done)")
        assert text.split() == ["True", "True"]
        assert any(PLOTLY in u["data"] for u in updates), "the live chart was not replaced"
        assert not problems, problems
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
