"""What every test shares: the network guard, the markers that say what a test needs (each
skipped with its reason where this machine lacks it) and the fixtures for a DPDK EAL and a lab.

The network guard: the suite sends traffic only to loopback or to namespaces that the code
itself creates. PERFKIT_SANDBOX=1 is set here for the whole session, so perfkit's own target
checks (perfkit.sandbox) refuse anything else, in this process and in every child it starts
(`perfkit` CLI runs, lab hosts); and while tests run, a Python socket in this process refuses
to connect or send to an Internet address outside that rule before any packet leaves.
"""
from __future__ import annotations

import functools
import importlib
import os
import shutil
import socket

import pytest

os.environ["PERFKIT_SANDBOX"] = "1"   # at import: before any test, and so before any child process

from perfkit import sandbox  # noqa: E402 (after the environment it reads)


# ------------------------------------------------------------------- markers

@functools.cache
def _privileges() -> bool:
    from perfkit.lab import have_privileges
    return have_privileges()


@functools.cache
def _importable(module: str) -> str | None:
    """None where module imports, else why not."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return str(exc)
    return None


def _missing_tools(names) -> str | None:
    missing = [n for n in names if shutil.which(n) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


def _why_not(mark) -> str | None:
    """Why this machine cannot run a test with this marker, or None (also for other markers)."""
    name = mark.name
    if name == "root":
        return None if _privileges() else "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    if name == "netns":
        if not _privileges():
            return "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to make network namespaces"
        return _missing_tools(["ip"])
    if name == "dpdk":
        why = _importable("perfkit._dpdk")
        return f"perfkit was built without DPDK (Debian: apt install libdpdk-dev): {why}" if why else None
    if name == "nginx":
        return "nginx is not installed (Debian: nginx-light)" if shutil.which("nginx") is None else None
    if name == "strace":
        return ("strace is not installed (install.sh installs it as root)"
                if shutil.which("strace") is None else None)
    if name == "tls":
        if _importable("perfkit._sock") or not importlib.import_module("perfkit._sock").HAVE_TLS:
            return "perfkit built without OpenSSL (libssl-dev)"
        return "no openssl command to make a certificate" if shutil.which("openssl") is None else None
    if name == "two_cpus":
        return "needs two CPUs to pin the ends apart" if len(os.sched_getaffinity(0)) < 2 else None
    if name == "tools":
        return _missing_tools(mark.args)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers():
        why = _why_not(mark)
        if why:
            pytest.skip(why)


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="session")
def eal():
    """DPDK's EAL, started once for the session, or a skip saying why it does not start here."""
    if why := _why_not(pytest.mark.dpdk.mark):
        pytest.skip(why)
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    try:
        return dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")


@pytest.fixture()
def lab():
    """A two-host perfkit lab, taken down after the test; a skip where none can be made."""
    from _labs import lab_module_or_skip, lab_up_or_skip
    lab = lab_up_or_skip(lab_module_or_skip())
    try:
        yield lab
    finally:
        lab.down()


# ----------------------------------------------------- the socket backstop

_INET = (socket.AF_INET, socket.AF_INET6)


def _guard(sock, address, call: str) -> None:
    """ConnectionRefusedError (before any packet) for an Internet destination outside the rule."""
    if address is None or sock.family not in _INET or not isinstance(address, tuple) or not address:
        return
    host = address[0]
    if not sandbox.allowed(host):
        raise ConnectionRefusedError(
            f"socket.{call} to {host!r} refused by the test suite's network guard: {sandbox.RULE}")


def _connect(orig):
    def connect(self, address):
        _guard(self, address, orig.__name__)
        return orig(self, address)
    connect.__name__ = orig.__name__
    return connect


def _sendto(orig):
    def sendto(self, data, *args):   # (data, address) or (data, flags, address)
        _guard(self, args[-1] if args else None, "sendto")
        return orig(self, data, *args)
    return sendto


def _sendmsg(orig):
    def sendmsg(self, buffers, *args):   # (buffers, ancdata, flags, address)
        _guard(self, args[2] if len(args) > 2 else None, "sendmsg")
        return orig(self, buffers, *args)
    return sendmsg


@pytest.fixture(scope="session", autouse=True)
def network_guard():
    """Python sockets of this process refuse Internet destinations outside the rule while
    tests run; unix and netlink sockets are not touched."""
    mp = pytest.MonkeyPatch()
    cls = socket.socket
    mp.setattr(cls, "connect", _connect(cls.connect))
    mp.setattr(cls, "connect_ex", _connect(cls.connect_ex))
    mp.setattr(cls, "sendto", _sendto(cls.sendto))
    mp.setattr(cls, "sendmsg", _sendmsg(cls.sendmsg))
    try:
        yield
    finally:
        mp.undo()
