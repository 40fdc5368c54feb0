"""One engine spread over child processes, for loads one process cannot hold.

A process may open at most RLIMIT_NOFILE files, and raising the hard limit needs
CAP_SYS_RESOURCE (often missing in containers and CI). HTTP load with more virtual
users than that splits its client workers over child processes, each with its own
limit, its own C worker threads and its own GIL. The parent's ProcessHandle speaks
to each child over a pipe (length-prefixed pickles: the child is our own code, a
trusted peer) and merges their snapshots, so perfkit.Run sees one engine whose
workers are all the children's workers, in order.

A child is `python -P -m perfkit.procs`; it ends when its pipe closes, so a
parent that dies takes its children's load with it.
"""
from __future__ import annotations

import os
import pickle
import resource
import struct
import subprocess
import sys
import threading
import time

from perfkit.errors import EngineError
from perfkit.stats import COUNTERS, Histogram

JOIN_POLL_S = 0.02   # how often join() asks the children whether their workers still run

_LEN = struct.Struct("!I")


def raise_fd_limit(sockets: int, field: str = "flows", split_hint: bool | None = None) -> None:
    """Make room for this many more sockets: raise the open-file limit (soft, and
    hard too where we may: CAP_SYS_RESOURCE); else a clear ValueError saying how
    many fit now, how to raise the hard limit and (HTTP users) how to split them
    over processes."""
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 64
    needed = sockets + open_now + 16  # + epoll, netns, what the engine opens besides
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
        return
    except (ValueError, OSError):
        fit = max(0, hard - open_now - 16)
        raise ValueError(
            f"{field}: {sockets} need {needed} open files (a socket each, {open_now} open already) but this "
            f"process may open at most {hard} (its hard limit, RLIMIT_NOFILE; raising it needs "
            f"CAP_SYS_RESOURCE): at most {fit} fit now. Raise the hard limit before starting Python or "
            f"Jupyter: as root `ulimit -Hn {needed}; ulimit -n {needed}` in the shell that starts it, or "
            f"`prlimit --pid PID --nofile={needed}:{needed}`; for a user a 'nofile' line in "
            f"/etc/security/limits.conf; systemd LimitNOFILE={needed}; docker --ulimit nofile={needed}"
            + (f". Or split the users over processes, each with its own limit: processes="
               f"{-(-sockets // max(1, fit))} (perfkit http --processes {-(-sockets // max(1, fit))})"
               if (field == "users" if split_hint is None else split_hint) else "")) from None


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    (n,) = _LEN.unpack(head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


class _Child:
    """One child process and its pipe; call() sends a request and waits for the reply."""

    def __init__(self, index: int, workers: list[dict], fd_field: str):
        self.index = index
        self.lock = threading.Lock()  # one request at a time on the pipe
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "perfkit.procs"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.roles = self.call("build", workers, fd_field)

    def call(self, op: str, *args):
        try:
            with self.lock:
                _send(self.proc.stdin, (op, args))
                status, value = _recv(self.proc.stdout)
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.poll()
            raise EngineError(f"process {self.index}: exited ({'code ' + str(code) if code is not None else 'pipe closed'}) "
                              "while asked to " + op) from None
        if status == "ok":
            return value
        kind, msg = value
        raise (ValueError if kind == "ValueError" else EngineError)(msg)

    def close(self) -> None:
        try:
            self.call("close")
        except (EngineError, ValueError):
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ProcessHandle:
    """An engine handle for perfkit.Run over socket-engine workers in several
    processes: groups[k] is child k's worker list; fd_field names the spec field
    to blame when a child's open-file limit cannot hold its sockets."""

    def __init__(self, groups: list[list[dict]], fd_field: str = "users"):
        self.children: list[_Child] = []
        self._closing = False   # close() has begun: a join() waiting in another thread returns
        self._closed = False
        self._joining = threading.Lock()   # held by join() while it waits; close() frees nothing under it
        try:
            for k, workers in enumerate(groups):
                self.children.append(_Child(k, workers, fd_field))
        except BaseException:
            self.close()
            raise
        self.roles = [r for c in self.children for r in c.roles]
        self._errors: list[str] = []
        self._last: dict[int, list] = {}  # each child's latest snapshot

    def _each(self, op: str, *args) -> list:
        out = []
        for c in self.children:
            try:
                out.append(c.call(op, *args))
            except (EngineError, ValueError) as exc:
                self._errors.append(str(exc))
                out.append(None)
        return out

    def start(self) -> None:
        started = []
        try:
            for c in self.children:
                c.call("start")
                started.append(c)
        except BaseException:
            for c in started:
                c.call("stop")
            raise

    def stop(self) -> None:
        self._each("stop")

    def running(self) -> bool:
        states = self._each("running")
        if None in states:  # a child died: the load is no longer what was asked, so end it all
            self.stop()
            return False
        return any(states)

    def join(self) -> None:
        """Wait for every child's workers to end, then join them (loss settles there). It
        asks whether they run every JOIN_POLL_S rather than wait in a child's join: a pipe
        held that long would keep close() from stopping the child."""
        self._check_open()
        with self._joining:
            while not self._closing and self._any_running():
                time.sleep(JOIN_POLL_S)
            if not self._closing:
                self._each("join")

    def _any_running(self) -> bool:
        for c in self.children:
            try:
                if c.call("running"):
                    return True
            except (EngineError, ValueError):
                pass   # a child that died: its join below says so
        return False

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("the engine is closed")

    def snapshot(self) -> list:
        self._check_open()
        out = []
        for k, (c, snaps) in enumerate(zip(self.children, self._each("snapshot"))):
            if snaps is None:  # a child that died: its last counters stand
                snaps = self._last.get(k)
                if snaps is None:
                    snaps = [([0] * len(COUNTERS), [0] * len(Histogram.LOWER))] * len(c.roles)
            self._last[k] = snaps
            out.extend(snaps)
        return out

    def http_urls(self, worker: int):
        for c in self.children:
            if worker < len(c.roles):
                try:
                    return c.call("http_urls", worker)
                except (EngineError, ValueError) as exc:  # a dead child: no counts, and its error stands
                    self._errors.append(str(exc))
                    return []
            worker -= len(c.roles)
        raise IndexError(worker)

    def error(self):
        errs = [e for e in self._each("error") if e] + self._errors
        return "; ".join(dict.fromkeys(errs)) or None

    def close(self) -> None:
        """Stop every child, wait for a join() in another thread to return, then end them."""
        if self._closed:
            return
        self._closing = True
        self._each("stop")
        with self._joining:
            for c in self.children:
                c.close()
            self.children = []
            self._closed = True


def _serve(stdin, stdout) -> None:
    """The child's loop: build one SockEngine, then answer the parent's requests."""
    from perfkit._sock import SockEngine  # the native engine: imported in the child alone
    engine = None
    while True:
        try:
            op, args = _recv(stdin)
        except EOFError:  # the parent is gone: stop the load, free everything
            break
        try:
            if op == "build":
                workers, field = args
                raise_fd_limit(sum(w.get("users", 0) for w in workers), field, split_hint=False)
                engine = SockEngine(workers)
                value = list(engine.roles)
            elif op == "snapshot":
                value = [(list(c), list(h)) for c, h in engine.snapshot()]
            elif op == "close":
                _send(stdout, ("ok", None))
                break
            else:  # start stop running join error http_urls
                value = getattr(engine, op)(*args)
            _send(stdout, ("ok", value))
        except Exception as exc:  # noqa: BLE001 (every failure goes back to the parent)
            _send(stdout, ("err", (type(exc).__name__, str(exc))))
    if engine is not None:
        engine.stop()
        engine.join()
        engine.close()


if __name__ == "__main__":
    replies = os.fdopen(os.dup(1), "wb")  # the pipe to the parent, ours alone:
    os.dup2(2, 1)                          # anything else printed goes to stderr
    _serve(sys.stdin.buffer, replies)
