"""One load from many hosts as one run, on ipyparallel (Jupyter's controller + engines).

    c = Cluster.start(n=3)                          # local engines
    c = Cluster.start(lab="t", hosts="h1,h2,h3")    # one engine inside each lab host
    c = Cluster.connect("myprofile")                # a running ipcluster (or a perfkit cluster)
    run = perfkit.run(HttpLoad(url, users=300), cluster=c)
    run.summary (merged), run.hosts (per host), run.env["hosts"]

A cluster perfkit starts has its controller listen on unix sockets (zmq ipc) under
/run/perfkit/clusters/NAME: a unix socket is reachable from every network namespace, so engines
in lab hosts reach it with no address and no packet outside the load under test.

A run over a cluster: split(spec, n) (perfkit.kinds.split) gives every engine its share; each
engine builds its share's engine handle (every check, in its own namespace, before anything
starts: one error naming the host), then all start at one wall-clock instant (the measured
skew is in the summary); ClusterHandle is the engine handle perfkit.Run drives, its workers
being every engine's workers in turn, so counters add up and histograms merge as for one host.
An engine that dies or stops answering ends its share with an error against its host; its
counters so far stand and the others run on.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

from perfkit.engines import dpdk, get as get_engine
from perfkit.errors import EngineError
from perfkit import kinds
from perfkit.kinds.split import needs_place, placed, split
from perfkit.lab import Lab
from perfkit.run import environment
from perfkit.stats import COUNTERS, Histogram, keep_groups, make_row, merge_counters, summarize

# root keeps its clusters beside its labs; anyone else in a directory of their own
CLUSTERS_DIR = "/run/perfkit/clusters" if os.geteuid() == 0 else f"/tmp/perfkit-{os.geteuid()}/clusters"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,15}")
HOST_ENV = "PERFKIT_CLUSTER_HOST"   # an engine's host name, given by whoever started it
ANSWER_S = 5.0      # an engine that does not answer a request by then is taken for dead
BUILD_S = 60.0      # how long an engine may take to build its share (sockets, ports, DPDK)
STATE_S = 0.1       # how often running() asks the engines near the run's end (the sampler asks every 20 ms)
POLL_AHEAD_S = 0.2  # running() asks from this long before the shares' planned end; before, no one (each
                    # row's snapshot brings the state): 2-3 requests a run where asking from 1 s before took 10
START_LEAD_S = 0.3  # the start instant lies this far ahead, plus the slowest round trip


class ClusterError(ValueError):
    """Bad input for a cluster (no cluster, no engines, a share an engine cannot run)."""


def _ipp():
    import ipyparallel  # an optional, heavy package: loaded with the first cluster only
    return ipyparallel


# ------------------------------------------------------------------ engine side
# These run inside the ipyparallel engines (pickled by reference: every engine imports
# perfkit.cluster); _SHARES holds the handles an engine has built, by run id.
_SHARES: dict = {}


def _boot_id() -> str:
    """This machine's boot id: engines that share it share CPUs (local engines, lab hosts)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _e_info():
    return {"host": os.environ.get(HOST_ENV) or socket.gethostname(), "pid": os.getpid(), "boot_id": _boot_id(),
            "euid": os.geteuid(), "netns": os.readlink("/proc/self/ns/net"), "sandbox": os.environ.get("PERFKIT_SANDBOX"),
            "shares": len(_SHARES)}


def _e_dpdk(eal: dict | None) -> None:
    """DPDK here, and this engine's EAL options (the caller's, with this engine's own worker CPUs)."""
    st = dpdk.status()
    if not st["available"]:
        raise EngineError(f"engine dpdk: DPDK is not available on this host: {st['detail']}")
    if eal is not None:   # EAL is up once per engine process: other options than its first run's are refused
        dpdk.configure(dpdk.EalOptions(**eal))


def _e_build(run_id: str, spec, engine_name: str, eal: dict | None = None):
    spec = dataclasses.replace(spec)   # the spec's checks again, here: this host's names and rules
    if engine_name == "dpdk":
        _e_dpdk(eal)
    env = environment(engine_name, spec)
    env["host"] = os.environ.get(HOST_ENV) or env["host"]
    plan = kinds.plan(spec, engine_name)   # as perfkit.Run builds: the kind's plan, or the spec for the engine to refuse
    handle = get_engine(engine_name).build(plan if plan is not None else spec)
    _SHARES[run_id] = handle
    if engine_name == "dpdk":   # each engine's own EAL: its file prefix (its pid), memory, CPUs
        env["eal_args"] = dpdk.detail().get("eal_args", [])
    return list(handle.roles), env, time.time()


def _e_start(run_id: str, at: float) -> float:
    handle = _SHARES[run_id]
    while (left := at - time.time()) > 0.002:
        time.sleep(left - 0.002)
    while time.time() < at:   # the last 2 ms spinning: sleep wakes late
        pass
    t = time.time()
    handle.start()
    return t


def _e_state(run_id: str):
    handle = _SHARES[run_id]
    return bool(handle.running()), handle.error()


def _e_snapshot(run_id: str):
    """The counters and the state in one answer: while the load runs, one request a second."""
    handle = _SHARES[run_id]
    return [(list(c), list(h)) for c, h in handle.snapshot()], bool(handle.running()), handle.error()


def _e_call(run_id: str, op: str, *args):
    return getattr(_SHARES[run_id], op)(*args)


def _e_close(run_id: str) -> None:
    handle = _SHARES.pop(run_id, None)
    if handle is not None:
        handle.close()


# ------------------------------------------------------------------ the cluster
def _state_dir(name: str) -> str:
    return os.path.join(CLUSTERS_DIR, name)


def _read_state(name: str):
    try:
        with open(os.path.join(_state_dir(name), "state.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_state(st: dict) -> None:
    path = os.path.join(st["dir"], "state.json")
    with open(path + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
    os.replace(path + ".tmp", path)


def _link_ipc(security: str) -> None:
    """ipyparallel 9 binds an ipc endpoint as BASE-PORT but engines and clients connect to
    BASE:PORT: link the second name to the first (both under the cluster's directory)."""
    for f in ("ipcontroller-engine.json", "ipcontroller-client.json"):
        with open(os.path.join(security, f)) as fh:
            d = json.load(fh)
        base = d["interface"].split("://", 1)[1]
        for v in d.values():
            for port in (v if isinstance(v, list) else [v]):
                if isinstance(port, int) and not isinstance(port, bool):
                    src, dst = f"{base}-{port}", f"{base}:{port}"
                    if os.path.exists(src) and not os.path.lexists(dst):
                        os.symlink(src, dst)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    for _ in range(50):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Cluster:
    """An ipyparallel cluster perfkit runs load on: Cluster.connect(profile) or Cluster.start(...)."""

    def __init__(self, client, name: str | None = None, state: dict | None = None):
        self.client = client
        self.name = name
        self.state = state
        self._lock = threading.RLock()   # one thread at a time submits on the client's sockets
        self._engines = None
        self._only: list[str] | None = None

    def select(self, hosts) -> "Cluster":
        """This cluster's engines on these hosts only ("h1,h2" or a list), for a run on part of it."""
        names = [h.strip() for h in hosts.split(",") if h.strip()] if isinstance(hosts, str) else list(hosts)
        unknown = [h for h in names if h not in self.hosts]
        if unknown or not names:
            raise ClusterError(f"hosts: {', '.join(unknown) or 'none named'}: not engines of cluster {self.name} "
                               f"({', '.join(self.hosts)})")
        part = Cluster(self.client, self.name, self.state)
        part._lock, part._only = self._lock, names
        return part

    # -------------------------------------------------------------- making one
    @classmethod
    def connect(cls, profile: str | None = None, url_file: str | None = None, timeout: float = 10.0) -> "Cluster":
        """A running cluster: a perfkit cluster by name, an ipcluster's IPython profile, or a
        controller's ipcontroller-client.json. ClusterError when there is none or it has no engines."""
        ipp = _ipp()
        st = _read_state(profile) if profile and NAME_RE.fullmatch(profile) else None
        try:
            if url_file or st:
                client = ipp.Client(url_file or st["client_file"], timeout=timeout)
            else:
                client = ipp.Client(profile=profile or "default", timeout=timeout)
        except (OSError, TimeoutError) as exc:
            what = f"profile {profile!r}" if profile or not url_file else f"{url_file}"
            raise ClusterError(f"cluster: no running cluster for {what}: no perfkit cluster of that name "
                               f"(perfkit cluster up) and no ipcontroller that answers "
                               f"({str(exc).splitlines()[0]})") from None
        c = cls(client, name=profile, state=st)
        if st:
            try:
                c.wait_for_engines(len(st["engines"]), timeout)
            except ClusterError:
                client.close()
                raise
        if not client.ids:
            client.close()
            raise ClusterError(f"cluster: {profile or url_file} has no engines (ipcluster engines, or perfkit cluster up)")
        return c

    @classmethod
    def start(cls, n: int | None = None, lab=None, hosts=None, name: str | None = None,
              timeout: float = 60.0) -> "Cluster":
        """Start a controller and engines: n local engines, or one engine in each of a lab's
        hosts (lab: a Lab or a lab's name; hosts: "h1,h2" or a list, default every host), each
        started inside its namespace as `ip netns exec` does, so it has its host's addresses and stack.
        The cluster lives until down(), also after this process ends (perfkit cluster status/down)."""
        if lab is None and hosts is not None:
            raise ClusterError("hosts: name hosts of a lab (lab=NAME)")
        if lab is not None:
            lab = Lab.attach(lab) if isinstance(lab, str) else lab
            names = [h.name for h in lab.hosts] if hosts is None else (
                [h.strip() for h in hosts.split(",") if h.strip()] if isinstance(hosts, str) else list(hosts))
            for h in names:
                try:
                    lab.host(h)
                except (KeyError, ValueError, IndexError) as exc:
                    raise ClusterError(f"hosts: {h!r} is not a host of lab {lab.name} ({exc})") from None
        else:
            n = 3 if n is None else int(n)
            if not 1 <= n <= 64:
                raise ClusterError(f"n: {n} engines is out of range 1..64")
            names = [f"e{k}" for k in range(n)]
        if not names:
            raise ClusterError("hosts: no hosts named")
        name = name or (lab.name if lab is not None else f"py{os.getpid()}")
        if not NAME_RE.fullmatch(name):
            raise ClusterError(f"name: {name!r} is not a cluster name (1-16 lowercase letters, digits, - or _)")
        if _read_state(name):
            raise ClusterError(f"name: cluster {name!r} is up already (perfkit cluster down {name})")
        d = _state_dir(name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d, mode=0o700)
        st = {"name": name, "dir": d, "lab": lab.name if lab is not None else None,
              "client_file": os.path.join(d, "profile", "security", "ipcontroller-client.json"),
              "controller_pid": None, "engines": []}
        env = dict(os.environ)  # PERFKIT_SANDBOX among it: the engines keep the guard the caller has
        try:
            with open(os.path.join(d, "controller.log"), "w") as log:
                ctl = subprocess.Popen([sys.executable, "-m", "ipyparallel.controller", f"--profile-dir={d}/profile",
                                        "--transport=ipc", f"--ip={d}/ctl", "--HeartMonitor.period=1000",
                                        "--log-level=WARN"],
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=d)
            st["controller_pid"] = ctl.pid
            _write_state(st)
            engine_file = os.path.join(d, "profile", "security", "ipcontroller-engine.json")
            deadline = time.monotonic() + timeout
            while not (os.path.exists(engine_file) and os.path.exists(st["client_file"])):
                if ctl.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f"cluster: the controller did not start (see {d}/controller.log)")
                time.sleep(0.05)
            _link_ipc(os.path.dirname(engine_file))
            for h in names:
                argv = [sys.executable, "-m", "ipyparallel.engine", f"--file={engine_file}", "--log-level=WARN"]
                with open(os.path.join(d, f"engine-{h}.log"), "w") as log:
                    kw = dict(stdout=log, stderr=subprocess.STDOUT, env={**env, HOST_ENV: h}, cwd=d)
                    p = (lab.popen(h, argv, **kw) if lab is not None
                         else subprocess.Popen(argv, start_new_session=True, **kw))
                st["engines"].append({"host": h, "pid": p.pid,
                                      "netns": lab.host(h).netns if lab is not None else None})
                _write_state(st)
            security = os.path.dirname(engine_file)
            c = cls(_ipp().Client(st["client_file"], timeout=max(5.0, deadline - time.monotonic())), name=name, state=st)
            while len(c.client.ids) < len(names):   # the schedulers bind their endpoints later: link them as they come
                _link_ipc(security)
                if time.monotonic() > deadline:
                    logs = " | ".join(f"{h}: {_tail(os.path.join(d, f'engine-{h}.log'))}" for h in names)
                    raise ClusterError(f"cluster {name}: {len(c.client.ids)} of {len(names)} engines registered "
                                       f"within {timeout:.0f} s ({logs})")
                time.sleep(0.1)
            _link_ipc(security)
            return c
        except BaseException:
            down(name)
            raise

    def wait_for_engines(self, n: int, timeout: float) -> None:
        try:
            self.client.wait_for_engines(n, timeout=timeout)
        except TimeoutError:
            got = len(self.client.ids)
            raise ClusterError(f"cluster {self.name}: {got} of {n} engines registered within {timeout:.0f} s"
                               + (f" (see {self.state['dir']}/engine-*.log)" if self.state else "")) from None

    # -------------------------------------------------------------- using one
    def engines(self) -> list[dict]:
        """Every engine: id, host (unique), pid, euid, netns."""
        if self._engines is None or sorted(e["id"] for e in self._engines) != sorted(self.client.ids):
            ids = sorted(self.client.ids)
            if not ids:
                raise ClusterError(f"cluster {self.name or ''}: no engines".replace("  ", " "))
            with self._lock:
                infos = self.client[ids].apply_async(_e_info)
            try:
                infos = infos.get(timeout=ANSWER_S * 2)
            except Exception as exc:  # noqa: BLE001 (an engine registered but gone: one line, before anything starts)
                raise ClusterError(f"cluster {self.name or ''}: not every engine answers ({_why(exc)})") from None
            seen: dict = {}
            out = []
            for i, info in zip(ids, infos):
                seen[info["host"]] = seen.get(info["host"], 0) + 1
                out.append({"id": i, **info})
            for e in out:   # several engines on one host: host:id tells them apart
                if seen[e["host"]] > 1:
                    e["host"] = f"{e['host']}:{e['id']}"
            self._engines = sorted(out, key=lambda e: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", e["host"])])
        return [e for e in self._engines if self._only is None or e["host"] in self._only]

    @property
    def hosts(self) -> list[str]:
        return [e["host"] for e in self.engines()]

    def submit(self, engine_id: int, fn, *args):
        """fn(*args) on one engine: an AsyncResult."""
        with self._lock:
            return self.client[engine_id].apply_async(fn, *args)

    def shares(self, spec) -> list:
        """spec split over this cluster's engines (perfkit.kinds.split), in the order of hosts; a
        DPDK port on a kernel interface placed on each engine's own lab host. ClusterError naming
        the field when it does not split, or needs engines in lab hosts and these are not."""
        hosts = self.hosts
        try:
            out = split(spec, len(hosts))
            if needs_place(spec):   # a DPDK port per engine: each on its own lab host's interface
                out = placed(out, self._lab_hosts(spec, hosts))
        except ValueError as exc:
            raise (exc if isinstance(exc, ClusterError) else ClusterError(f"cluster: {exc}")) from None
        return out

    def _lab_hosts(self, spec, hosts: list[str]) -> list:
        """The lab host (perfkit.lab.Host) of every engine: a spec with a port per engine needs them."""
        lab = (self.state or {}).get("lab")
        if not lab:
            raise ClusterError(f"port: {type(spec).__name__} takes a DPDK port on every engine's own host: "
                               f"run it on a cluster of lab hosts (perfkit cluster up --lab NAME --hosts ...)")
        try:
            lab = Lab.attach(lab)
            return [lab.host(h) for h in hosts]
        except (KeyError, ValueError, IndexError) as exc:
            raise ClusterError(f"cluster: the engines' lab {lab} is not up as it was ({exc})") from None

    def handle(self, spec, engine_name: str) -> "ClusterHandle":
        """The engine handle of spec split over every engine (built there, not started)."""
        return ClusterHandle(self, spec, engine_name)

    def status(self) -> dict:
        return {"name": self.name, "engines": self.engines(),
                "lab": (self.state or {}).get("lab"), "dir": (self.state or {}).get("dir")}

    def close(self) -> None:
        """Disconnect (the cluster stays up)."""
        self.client.close()

    def down(self) -> None:
        """Stop a cluster perfkit started (controller and engines); just disconnect from another."""
        try:
            self.client.close()
        finally:
            if self.state:
                down(self.name)

    def __repr__(self) -> str:
        return f"<perfkit.Cluster {self.name or ''} {len(self.client.ids)} engines>"


def down(name: str) -> bool:
    """Stop perfkit cluster name: its engines, its controller, its directory. False if none."""
    st = _read_state(name)
    if st is None:
        return False
    for e in st.get("engines", []):
        _kill_group(e["pid"])
    if st.get("controller_pid"):
        _kill_group(st["controller_pid"])
    shutil.rmtree(st["dir"], ignore_errors=True)
    return True


def clusters() -> list[dict]:
    """The state of every perfkit cluster that is up, with each engine's liveness."""
    out = []
    try:
        names = sorted(os.listdir(CLUSTERS_DIR))
    except OSError:
        return out
    for n in names:
        st = _read_state(n)
        if st is None:
            continue
        for e in st["engines"]:
            e["alive"] = os.path.exists(f"/proc/{e['pid']}")
        st["controller_alive"] = bool(st.get("controller_pid")) and os.path.exists(f"/proc/{st['controller_pid']}")
        out.append(st)
    return out


# ------------------------------------------------------------------ the handle perfkit.Run drives
class ClusterHandle:
    """spec split over a cluster's engines, as one engine handle (perfkit.engines.EngineHandle):
    the workers are every engine's workers, host by host; a host that fails keeps its last
    counters and its error (error() names it)."""

    def __init__(self, cluster: Cluster, spec, engine_name: str):
        self.cluster = cluster
        self.spec = spec
        self.engine_name = engine_name
        engines = cluster.engines()
        self.hosts = [e["host"] for e in engines]
        self._ids = [e["id"] for e in engines]
        shares = cluster.shares(spec)
        self.shares = dict(zip(self.hosts, shares))
        eals = _eal_options(engines) if engine_name == "dpdk" else [None] * len(engines)
        self._run = uuid.uuid4().hex
        self._errors: dict[str, str] = {}
        self._dead: set[str] = set()
        self._running = {h: False for h in self.hosts}
        self._state_t = 0.0
        self._closed = False
        self.asked: dict[str, int] = {}   # requests to the engines since start(), by function (each costs them CPU)
        self.first_poll_s: float | None = None   # when running() first asked the engines (run time, s)
        # arm: every engine builds its share; any failure undoes them all, before anything starts
        sent = time.time()
        pending = {h: cluster.submit(i, _e_build, self._run, s, engine_name, eal)
                   for h, i, s, eal in zip(self.hosts, self._ids, shares, eals)}
        built, failed = {}, []
        t0 = time.monotonic()
        self.clock_offset_s: dict[str, float] = {}   # engine clock - ours, bounded by the build's time
        for h, ar in pending.items():
            try:
                built[h] = ar.get(timeout=max(0.1, BUILD_S - (time.monotonic() - t0)))
                if built[h][2] > time.time() + 0.05 or built[h][2] < sent - 0.05:
                    self.clock_offset_s[h] = built[h][2] - (sent + time.time()) / 2
                else:
                    self.clock_offset_s[h] = 0.0   # within the round trip: as good as this can tell
            except Exception as exc:  # noqa: BLE001 (a remote failure of any kind names its host)
                failed.append(f"host {h}: {_why(exc)}")
        self.build_s = time.monotonic() - t0
        if failed:
            for h in built:
                self._ask(h, _e_close, wait=True)
            raise ClusterError("; ".join(failed))
        self.envs = {h: built[h][1] for h in self.hosts}
        self.host_roles = {h: built[h][0] for h in self.hosts}
        self.roles = [r for h in self.hosts for r in self.host_roles[h]]
        zero = ([0] * len(COUNTERS), [0] * len(Histogram.LOWER))
        self._last = {h: [zero] * len(self.host_roles[h]) for h in self.hosts}
        self._groups = kinds.counter_groups(spec)
        self._prev = {h: ([list(zero[0])] * len(self.host_roles[h]), Histogram(), 0.0) for h in self.hosts}
        self._t0: float | None = None
        self.host_rows: list[dict] = []   # every host's own rows, with a host column (host_frame())
        self.start_skew_s: float | None = None
        self.start_times: dict[str, float] = {}
        self.start_lag_s = 0.0

    # -------------------------------------------------------------- requests
    def _id(self, host: str) -> int:
        return self._ids[self.hosts.index(host)]

    def _fail(self, host: str, why: str) -> None:
        if host not in self._dead:
            self._dead.add(host)
            self._errors.setdefault(host, why)
            self._running[host] = False

    def _ask(self, host: str, fn, *args, wait: bool = True, timeout: float = ANSWER_S):
        """fn(run id, *args) on host's engine: its value (wait), or the AsyncResult; None and
        the host marked failed when the engine is gone or does not answer in time."""
        if host in self._dead:
            return None
        self.asked[fn.__name__] = self.asked.get(fn.__name__, 0) + 1
        try:
            ar = self.cluster.submit(self._id(host), fn, self._run, *args)
            return ar.get(timeout=timeout) if wait else ar
        except Exception as exc:  # noqa: BLE001 (a dead engine, a lost controller, a remote error)
            self._fail(host, f"engine {'not answering' if _timeout(exc) else 'failed'}: {_why(exc)}")
            return None

    def _all(self, fn, *args, timeout: float = ANSWER_S) -> dict:
        """fn on every live host at once; {host: value} of those that answered."""
        ars = {h: self._ask(h, fn, *args, wait=False) for h in self.hosts if h not in self._dead}
        out, t0 = {}, time.monotonic()
        for h, ar in ars.items():
            if ar is None:
                continue
            try:
                out[h] = ar.get(timeout=max(0.05, timeout - (time.monotonic() - t0)))
            except Exception as exc:  # noqa: BLE001
                self._fail(h, f"engine {'not answering' if _timeout(exc) else 'failed'}: {_why(exc)}")
        return out

    # -------------------------------------------------------------- the contract
    def start(self) -> None:
        rtt = self.build_s if self.build_s < 1 else 0.05
        at = time.time() + START_LEAD_S + 2 * rtt
        self.start_at = at
        times = self._all(_e_start, at, timeout=ANSWER_S + START_LEAD_S + 2 * rtt)
        if not times:
            self.close()
            raise EngineError("cluster: no engine started: " + "; ".join(f"{h}: {e}" for h, e in self._errors.items()))
        self.start_times = times
        self.start_skew_s = max(times.values()) - min(times.values())
        self._running.update({h: True for h in times})
        self._state_t = self._t0 = time.monotonic()
        self.start_lag_s = max(0.0, time.time() - min(times.values()))   # the first share started this long before _t0
        self.asked = {}

    def stop(self) -> None:
        for h in self.hosts:
            self._ask(h, _e_call, "stop", wait=False)

    def _see(self, host: str, run: bool, err) -> None:
        self._running[host] = run
        if err:
            self._errors.setdefault(host, err)

    def running(self) -> bool:
        """Until the run's last second, the state the last row's snapshot brought (no request of
        its own); from POLL_AHEAD_S before the shares' planned end (they started start_lag_s before
        _t0), or with no duration, the engines asked every STATE_S."""
        now = time.monotonic()
        duration = float(getattr(self.spec, "duration", 0) or 0)
        early = duration > 0 and now - self._t0 < duration - self.start_lag_s - POLL_AHEAD_S
        if not early and now - self._state_t >= STATE_S:
            if self.first_poll_s is None:
                self.first_poll_s = now - self._t0
            for h, (run, err) in self._all(_e_state).items():
                self._see(h, run, err)
            self._state_t = time.monotonic()
        return any(self._running[h] for h in self.hosts if h not in self._dead)

    def join(self) -> None:
        self._all(_e_call, "join", timeout=ANSWER_S + float(getattr(self.spec, "duration", 0) or 0))
        for h, (run, err) in self._all(_e_state).items():
            self._see(h, run, err)

    def snapshot(self) -> list:
        got = self._all(_e_snapshot)
        t = time.monotonic() - self._t0 if self._t0 is not None else 0.0
        out = []
        for h in self.hosts:
            if h in got:
                self._see(h, got[h][1], got[h][2])
            if h in got and len(got[h][0]) == len(self.host_roles[h]):
                self._last[h] = got[h][0]
                self._host_row(h, t)
            out.extend(self._last[h])   # a failed host: its last counters stand
        return out

    def _host_row(self, host: str, t: float) -> None:
        prev_workers, prev_hist, prev_t = self._prev[host]
        if t - prev_t <= 1e-3:
            return
        workers = [list(c) for c, _ in self._last[host]]
        hist = Histogram.merge(h for _, h in self._last[host])
        row = make_row(t, t - prev_t, merge_counters(prev_workers), merge_counters(workers), prev_hist, hist,
                       prev_workers, workers)
        self.host_rows.append({"host": host, **keep_groups(row, self._groups)})
        self._prev[host] = (workers, hist, t)

    def host_frame(self):
        """Every host's rows (polars), a host column first: the shares behind run.frame's totals."""
        import polars as pl  # polars loads with the first run, not with perfkit
        frames = [pl.DataFrame([r for r in self.host_rows if r["host"] == h], infer_schema_length=None)
                  for h in self.hosts if any(r["host"] == h for r in self.host_rows)]
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    def error(self):
        return "; ".join(f"host {h}: {e}" for h, e in self._errors.items()) or None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._all(_e_close)

    # -------------------------------------------------------------- beside the contract
    def http_urls(self, worker: int):
        for h in self.hosts:
            n = len(self.host_roles[h])
            if worker < n:
                return self._ask(h, _e_call, "http_urls", worker) or []
            worker -= n
        raise IndexError(worker)

    def host_summaries(self) -> dict:
        """Every host's own summary, from its last counters, with its error and whether it finished."""
        out = {}
        for h in self.hosts:
            workers = [list(c) for c, _ in self._last[h]]
            roles = self.host_roles[h]
            s = summarize(getattr(self.spec, "test", type(self.spec).__name__), merge_counters(workers),
                          Histogram.merge(hh for _, hh in self._last[h]), workers, roles,
                          getattr(self.shares[h], "size", 0), kinds.summary_figures(self.spec))
            s["finished"] = h not in self._dead and not self._errors.get(h)
            if h in self._errors:
                s["error"] = self._errors[h]
            if h in self.start_times:
                s["started_at"] = self.start_times[h]
            out[h] = s
        return out

    def summary_extra(self) -> dict:
        return {"hosts": self.host_summaries(), "start_skew_s": self.start_skew_s,
                "clock_offset_s": self.clock_offset_s,   # a host off by more than the interval: its rows are off too
                "cluster": self.cluster.name, "finished_hosts": [h for h in self.hosts if h not in self._errors]}


def _eal_options(engines: list[dict]) -> list[dict]:
    """Every engine's EAL options: the caller's (perfkit.engines.dpdk.configure, the CLI's --mem,
    --hugepages, --cpus ...), with worker CPUs split among the engines of one machine (the k-th
    of m takes every m-th CPU from the k-th on) so no two engines' workers share a core; engines
    on other machines each take the whole list. ClusterError when a machine has fewer CPUs than engines."""
    base = dataclasses.asdict(dpdk.eal_options())
    cpus = base["worker_cpus"]
    out = [dict(base) for _ in engines]
    if cpus:
        machines: dict = {}
        for k, e in enumerate(engines):
            machines.setdefault(e.get("boot_id") or e["host"], []).append(k)
        for ks in machines.values():
            if len(cpus) < len(ks):
                raise ClusterError(f"worker_cpus: {len(cpus)} CPUs ({dpdk.cpu_list(cpus)}) cannot give each of the "
                                   f"{len(ks)} engines on one machine ({', '.join(engines[k]['host'] for k in ks)}) "
                                   "its own: name as many CPUs as engines there, or none")
            for j, k in enumerate(ks):
                out[k]["worker_cpus"] = tuple(cpus[j::len(ks)])
    return out


def _tail(path: str) -> str:
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing logged"


def _timeout(exc) -> bool:
    return isinstance(exc, TimeoutError) or type(exc).__name__ == "TimeoutError"


def _why(exc) -> str:
    """One line for a remote or local failure: the remote exception's own type and message."""
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    if ename:
        return f"{evalue}" if ename in ("ValueError", "EngineError", "ClusterError") else f"{ename}: {evalue}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
