"""Every engine handle meets one declared contract (perfkit.engines.EngineHandle): the
native engines, whose lifecycle is written once (native/common/engine.c and
engine_base.pxi), ProcessHandle and RemoteHandle."""
import inspect

import pytest

from perfkit.engines import EngineHandle
from perfkit.engines.remote import RemoteHandle
from perfkit.procs import ProcessHandle

METHODS = ("start", "stop", "running", "join", "snapshot", "error", "close")


def _native():
    from perfkit._sock import SockEngine
    out = [SockEngine]
    try:
        from perfkit._dpdk import DpdkEngine, TcpEngine
    except ImportError:  # built without DPDK
        return out
    return out + [DpdkEngine, TcpEngine]


def test_the_contract_is_what_run_drives():
    assert set(METHODS) <= set(dir(EngineHandle)) and "roles" in EngineHandle.__annotations__


@pytest.mark.parametrize("cls", _native() + [ProcessHandle, RemoteHandle], ids=lambda c: c.__name__)
def test_every_handle_has_the_calls(cls):
    for name in METHODS:
        fn = getattr(cls, name)
        assert callable(fn), name
        if not inspect.isbuiltin(fn) and inspect.isfunction(fn):  # Python: callable with no arguments
            params = list(inspect.signature(fn).parameters.values())[1:]
            assert all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                       for p in params), name


@pytest.mark.parametrize("cls", _native(), ids=lambda c: c.__name__)
def test_native_engines_share_one_base(cls):
    base = cls.__mro__[1]
    assert base.__name__ == "EngineBase"
    for name in METHODS:
        assert name not in vars(cls), f"{cls.__name__}.{name}: the lifecycle is written once, in EngineBase"


def test_a_socket_engine_is_a_handle_through_its_life():
    from perfkit._sock import SockEngine
    from perfkit.errors import EngineError
    e = SockEngine([{"role": "udp_recv", "local": ("127.0.0.1", 0), "size": 64, "duration": 0.05}])
    try:
        assert isinstance(e, EngineHandle)
        assert e.roles == ["udp_recv"]
        e.start()
        e.join()
        assert not e.running() and e.error() is None
        (c, h), = e.snapshot()
        assert len(c) and len(h)
    finally:
        e.close()
    e.stop()   # after close: still safe
    with pytest.raises(EngineError, match="closed"):
        e.running()


def test_a_misspelt_worker_key_is_refused_by_every_native_engine():
    """Worker configurations cross into C once, through a checked key list: a misspelt key is an
    error naming it, never a C field silently left at its default."""
    from perfkit import _sock
    with pytest.raises(ValueError, match="socket engine worker: unknown configuration key 'duraton'"):
        _sock.SockEngine([{"role": "udp_send", "size": 64, "duraton": 1.0}])
    assert {"duration", "size", "connect_timeout"} <= _sock.WORKER_KEYS
    dpdk = pytest.importorskip("perfkit._dpdk")
    assert {"duration", "size", "probe_rate"} <= dpdk.WORKER_KEYS
    assert {"duration", "cps", "keepalive"} <= dpdk.TCP_WORKER_KEYS
    with pytest.raises(ValueError, match="DPDK engine worker: unknown configuration key 'sise'"):
        dpdk.check_worker_keys({"role": "gen", "sise": 64}, dpdk.WORKER_KEYS, "DPDK engine")
