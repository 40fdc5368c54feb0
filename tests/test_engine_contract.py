"""One contract, every engine handle perfkit.Run drives (perfkit/engines/__init__.py): the
socket engine's SockEngine, the DPDK UDP and TCP engines, ProcessHandle (perfkit/procs.py)
and RemoteHandle (perfkit/remote.py, against a `perfkit serve` in this process on loopback).

  start                  a built handle starts; running() says so; snapshot() has one
                         (counters, histogram) per role
  stop from a thread     stop() from another thread ends it quickly; join() returns; no error
  close during join      close() from one thread while another waits in join(): both return
                         soon, and a later join() says the engine is closed
  snapshot after close   snapshot() on a closed handle says it is closed; close() again is harmless
  error reported         a failure is an EngineError naming its cause, or error() after join()

Nothing here runs longer than it must: every handle is asked for a long run and stopped.
A handle that breaks a clause is marked xfail(strict=True) with what fails, not mended here.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import threading
import time

import pytest

from perfkit.errors import EngineError
from perfkit.spec import LocalTest, RemoteTest

from _labs import close_while_another_thread_joins
from _sock_tests import serving

SOON = 3.0          # s: what "quickly" is for stop() and close() on this shared 2-CPU machine
_ring = itertools.count()


# ------------------------------------------------------------------ the handles

def _socket_handle():
    from perfkit.engines import socket as eng
    return eng.build(LocalTest("udp_bw", duration="30s", rate="10kpps", port=_free_port()))


def _dpdk_handle(ring=None):
    from perfkit.engines import dpdk
    from perfkit.spec import DpdkFlows
    ring = ring or f"ct{next(_ring)}"
    return dpdk.build(DpdkFlows(port=f"ring:{ring}:0", peer=f"ring:{ring}:1", rate="100kpps", duration="60s"))


def _dpdk_tcp_handle(ring=None):
    from perfkit.engines import dpdk_tcp
    from perfkit.spec import DpdkHttpServer
    return dpdk_tcp.build(DpdkHttpServer(port=f"ring:{ring or f'cts{next(_ring)}'}:1", duration=30))


def _process_handle():
    from perfkit.kinds.qperf import workers_for
    from perfkit.procs import ProcessHandle
    # 6 s, not 30: a clause it breaks by blocking then costs seconds, not the whole run
    return ProcessHandle([workers_for(LocalTest("udp_bw", duration="6s", rate="10kpps", port=_free_port()))],
                         "flows")


def _remote_handle(server):
    from perfkit.engines import socket as eng
    return eng.build(RemoteTest(test="udp_bw", port=server.port, size=64, rate="10kpps", duration="30s"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _made(kind, request):
    """A fresh handle of kind (built, not started), closed on the way out."""
    if kind in ("dpdk", "dpdk_tcp"):
        request.getfixturevalue("eal")
    if kind == "remote":
        with serving() as server:
            h = _remote_handle(server)
            try:
                yield h
            finally:
                with contextlib.suppress(EngineError):
                    h.close()
        return
    h = {"socket": _socket_handle, "dpdk": _dpdk_handle, "dpdk_tcp": _dpdk_tcp_handle,
         "process": _process_handle}[kind]()
    try:
        yield h
    finally:
        with contextlib.suppress(EngineError):
            h.close()


def _kinds(xfails: dict[str, str] | None = None):
    """Every handle kind as a parameter, the DPDK ones marked, a known breach xfail(strict)."""
    marks = {"dpdk": [pytest.mark.dpdk], "dpdk_tcp": [pytest.mark.dpdk]}
    out = []
    for kind in ("socket", "dpdk", "dpdk_tcp", "process", "remote"):
        m = list(marks.get(kind, []))
        if xfails and kind in xfails:
            m.append(pytest.mark.xfail(strict=True, reason=xfails[kind]))
        out.append(pytest.param(kind, marks=m, id=kind))
    return out


def _in_thread(fn, within=SOON):
    """fn() in a thread: what it returned or raised, or a failure if it took longer than within."""
    out = []

    def call():
        try:
            out.append(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 (handed back to the test)
            out.append(("raised", exc))
    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(within)
    assert out, f"{getattr(fn, '__name__', fn)} did not return within {within:g} s"
    status, value = out[0]
    if status == "raised":
        raise value
    return value


def _wait_stopped(h, within=SOON):
    deadline = time.monotonic() + within
    while _in_thread(h.running):
        assert time.monotonic() < deadline, f"still running {within:g} s after stop()"
        time.sleep(0.02)


# ------------------------------------------------------------------ the contract

@pytest.mark.parametrize("kind", _kinds())
def test_start_runs_and_snapshots_one_entry_per_role(kind, request):
    with _made(kind, request) as h:
        roles = list(h.roles)
        assert roles and all(isinstance(r, str) for r in roles)
        _in_thread(h.start)
        time.sleep(0.2)
        assert _in_thread(h.running), "not running 0.2 s after start() of a 30 s run"
        snaps = _in_thread(h.snapshot)
        assert len(snaps) == len(roles)
        for counters, hist in snaps:
            assert len(counters) > 0 and len(hist) > 0
        _in_thread(h.stop)
        _wait_stopped(h)
        _in_thread(h.join)


@pytest.mark.parametrize("kind", _kinds())
def test_stop_from_another_thread_ends_the_run(kind, request):
    with _made(kind, request) as h:
        _in_thread(h.start)
        time.sleep(0.2)
        t0 = time.monotonic()
        stopper = threading.Thread(target=h.stop)
        stopper.start()
        stopper.join(SOON)
        assert not stopper.is_alive(), f"stop() did not return within {SOON:g} s"
        _wait_stopped(h)
        _in_thread(h.join)
        assert time.monotonic() - t0 < SOON
        assert _in_thread(h.error) is None


@pytest.mark.parametrize("kind", _kinds())
def test_close_while_another_thread_joins(kind, request):
    with _made(kind, request) as h:
        close_while_another_thread_joins(h, within=SOON)


@pytest.mark.parametrize("kind", _kinds())
def test_snapshot_after_close_says_closed(kind, request):
    with _made(kind, request) as h:
        _in_thread(h.start)
        time.sleep(0.1)
        _in_thread(h.close)
        with pytest.raises(EngineError, match="closed"):
            _in_thread(h.snapshot)
        _in_thread(h.close)   # twice: nothing happens


@pytest.mark.parametrize("kind", _kinds())
def test_an_error_is_reported(kind, request):
    """Each handle's own way to fail, reported: a port another handle holds fails the build
    with an EngineError naming it; a child process that dies or a control connection that
    breaks mid-run ends the run with error() saying so."""
    if kind == "socket":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
            holder.bind(("127.0.0.1", 0))
            from perfkit.engines import socket as eng
            with pytest.raises(EngineError, match="in use"):
                eng.build(LocalTest("udp_bw", duration="30s", port=holder.getsockname()[1]))
    elif kind in ("dpdk", "dpdk_tcp"):
        request.getfixturevalue("eal")
        make, ring = (_dpdk_handle, f"ce{next(_ring)}") if kind == "dpdk" else (_dpdk_tcp_handle, f"cte{next(_ring)}")
        first = make(ring)
        try:
            with pytest.raises(EngineError, match=f"port ring:{ring}:[01] is already open"):
                make(ring)
        finally:
            first.close()
    elif kind == "process":
        with _made(kind, request) as h:
            _in_thread(h.start)
            time.sleep(0.2)
            os.kill(h.children[0].proc.pid, signal.SIGKILL)
            _wait_stopped(h)
            _in_thread(h.join)
            err = _in_thread(h.error)
            assert err and "process 0" in err and "exited" in err, err
    else:
        with serving() as server:
            h = _remote_handle(server)
            try:
                _in_thread(h.start)
                time.sleep(0.2)
                h.ctl.sock.shutdown(socket.SHUT_RDWR)   # the control connection breaks mid-run
                _in_thread(h.stop)
                _wait_stopped(h)
                _in_thread(h.join, within=SOON * 5)
                err = _in_thread(h.error)
                assert err and "control connection" in err, err
            finally:
                with contextlib.suppress(EngineError):
                    h.close()


# ------------------------------------------------------------------ plans: what a kind hands its engine

def _plain(x) -> bool:
    if isinstance(x, (str, int, float, bool, bytes, type(None))):
        return True
    if isinstance(x, (list, tuple)):
        return all(_plain(v) for v in x)
    return isinstance(x, dict) and all(isinstance(k, str) and _plain(v) for k, v in x.items())


def _specs_with_plans():
    from perfkit.spec import DpdkFlows, DpdkReflect, HttpLoad, HttpServe, SocketReflect
    return [LocalTest("udp_bw"), LocalTest("tcp_lat"), RemoteTest(test="udp_bw", flip=True),
            HttpLoad(url="http://127.0.0.1:8080/", users=4), HttpLoad(url="http://127.0.0.1:8080/", users=4, processes=2),
            HttpServe(port=0), SocketReflect(), DpdkFlows(port="ring:pp:0", peer="ring:pp:1", cores=2, flows=4),
            DpdkReflect(port="ring:pq:1", peer="ring:pr:0", mode="forward")]


@pytest.mark.parametrize("spec", _specs_with_plans(), ids=lambda s: type(s).__name__)
def test_a_kinds_plan_is_plain_data_for_the_engine_it_names(spec):
    from perfkit import kinds
    plan = kinds.plan(spec)
    assert _plain(plan), plan
    assert plan["engine"] == kinds.lookup(spec, "ENGINE") and plan["spec"] == type(spec).__name__
    assert kinds.plan(spec, "nonesuch") is None   # another engine's: that engine refuses the spec itself


def test_an_engine_refuses_a_plan_or_spec_that_is_not_its_own():
    from perfkit import kinds
    from perfkit.engines import dpdk, socket as eng
    from perfkit.spec import DpdkFlows
    with pytest.raises(ValueError, match="^engine: socket runs .* not DpdkFlows$"):
        eng.build(kinds.plan(DpdkFlows(port="ring:pp:0")))
    with pytest.raises(ValueError, match="^engine: dpdk runs DpdkFlows and DpdkReflect specs, not LocalTest$"):
        dpdk.build(LocalTest("udp_bw"))
    with pytest.raises(ValueError, match="^engine: socket runs .* not object$"):
        eng.build(object())
