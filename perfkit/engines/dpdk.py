"""The DPDK engine: EAL once per process, ports from vdev strings, UDP flows.

    perfkit.Run(DpdkFlows(port="ring:a:0", peer="ring:a:1", rate="1Mpps"), engine="dpdk")
    perfkit.Run(DpdkReflect(port="net_memif0,role=server", mode="reverse"), engine="dpdk")
    perfkit.Run(DpdkReflect(port="ring:b:1", peer="ring:c:0", mode="forward"), engine="dpdk")

EAL starts on first use, once per process, from EalOptions (configure() sets them
before that): --no-huge unless enough hugepages are free, no PCI (-a ADDR for each NIC
a spec's ports name instead, checked against sysfs first), no telemetry,
no shared config, one EAL lcore whose CPU set is the calling thread's whole
affinity (so the caller -- a Jupyter kernel's main thread -- is never pinned; its
affinity is also saved and restored around rte_eal_init). Datapath workers are
pthreads that register with DPDK (rte_thread_register), optionally pinned to
EalOptions.worker_cpus. A failed init cannot be retried in the same process.

Each run opens its ports (rte_dev_probe, or rte_eth_from_rings for ring:NAME:0|1)
and closes and unplugs them when it ends, so runs can follow each other in one
process without leaking ports, threads, file descriptors or mbufs. (Except
net_af_xdp: DPDK 22.11's af_xdp close keeps the interface's xsk socket, BPF fds
and umem mbufs until the process ends, and the interface cannot be opened again.)

With cores N, every port gets N queues and each side N workers (one per queue,
each with its own counters and mempool cache); the generators split the flows and
the rate. Frames: a size, a size mix (IMIX) as one preallocated pattern, jumbo
frames from a second pool; flows over address and port ranges; a TSC-paced ramp;
a latency probe stream beside the load (its own histogram: summary probe_lat_*).

build(plan) reads (perfkit.kinds.dpdk_udp makes the plan):
    engine      "dpdk"
    spec        the spec's class name (for the message when a plan is not this engine's)
    ports       [(dev, ip or None)]: the ports to open, in the order workers name them
    workers     the worker configurations (DpdkEngine's keys), receiving workers first;
                each gets its CPU here (EalOptions.worker_cpus)
    queues      the queues every port opens with
    netns       the network namespace the ports open in, or None
    wait_memif  a generator: wait (bounded) for its memif links to come up
"""
from __future__ import annotations

import atexit
import os
import sys
import time
from dataclasses import asdict, dataclass

from perfkit.engines.handle import EngineHandle, as_plan
from perfkit.errors import EngineError
from perfkit import nics
from perfkit.nics import pci_port_addresses

NAME = "dpdk"


def cpu_list(cpus) -> str:
    """CPU numbers as taskset and EAL write them: 0,1,3."""
    return ",".join(str(c) for c in sorted(cpus))


LOG_LEVELS = {"emergency": 1, "alert": 2, "critical": 3, "error": 4, "warning": 5,
              "notice": 6, "info": 7, "debug": 8}


@dataclass(frozen=True)
class EalOptions:
    """How EAL starts (once per process).

    memory_mb    memory EAL takes for mbufs, rings and ports (-m)
    hugepages    True: hugepages (--in-memory, root, enough free); False: --no-huge;
                 None: hugepages when enough are free and we are root, else --no-huge
    log_level    DPDK's log level on stderr: error, warning, info, debug, ...
    worker_cpus  pin datapath workers to these CPUs, round robin; None = not pinned
    mbufs        buffers in the process-wide pool (2 KiB data each)
    pmd_dir      a directory (or one .so) of PMD plugins EAL loads besides the ones it
                 autoloads (-d): drivers built apart from Debian's DPDK; None = none
    """
    memory_mb: int = 512
    hugepages: bool | None = None
    log_level: str = "error"
    worker_cpus: tuple[int, ...] | None = None
    mbufs: int = 16383
    pmd_dir: str | None = None

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        mem = self.memory_mb
        if isinstance(mem, bool) or not isinstance(mem, int) or not 64 <= mem <= 1 << 20:
            raise ValueError(f"memory_mb: {mem!r} is not a whole number of MB in 64..1048576")
        if self.hugepages not in (None, True, False):
            raise ValueError(f"hugepages: {self.hugepages!r} is not true, false or None (auto)")
        if str(self.log_level).lower() not in LOG_LEVELS:
            raise ValueError(f"log_level: {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        put("log_level", str(self.log_level).lower())
        if self.worker_cpus is not None:
            cpus = self.worker_cpus
            if isinstance(cpus, str):
                cpus = [c for c in cpus.replace(" ", "").split(",") if c]
            try:
                cpus = tuple(int(c) for c in cpus)
            except (TypeError, ValueError):
                raise ValueError(f"worker_cpus: {self.worker_cpus!r} is not a list of CPU numbers") from None
            allowed = os.sched_getaffinity(0)
            bad = [c for c in cpus if c not in allowed]
            if not cpus or bad:
                raise ValueError(f"worker_cpus: {bad or 'none'} not among the CPUs this process may use "
                                 f"({cpu_list(allowed)})")
            put("worker_cpus", cpus)
        mbufs = self.mbufs
        if isinstance(mbufs, bool) or not isinstance(mbufs, int) or not 1023 <= mbufs <= 1 << 20:
            raise ValueError(f"mbufs: {mbufs!r} is out of range 1023..1048576")
        if self.pmd_dir is not None:
            d = str(self.pmd_dir)
            if not d or "\0" in d or d.startswith("-") or not (os.path.isdir(d) or
                                                               (os.path.isfile(d) and d.endswith(".so"))):
                raise ValueError(f"pmd_dir: {self.pmd_dir!r} is not a directory of PMD plugins or a .so file")
            put("pmd_dir", os.path.abspath(d))
        # the pool must fit: ~2.3 KiB per mbuf, and room for rings and ports
        if mbufs * 2.4 / 1024 > mem * 0.75:
            raise ValueError(f"mbufs: {mbufs} buffers need about {mbufs * 2.4 / 1024:.0f} MB; "
                             f"give memory_mb at least {int(mbufs * 2.4 / 1024 / 0.75) + 1}")

    def use_hugepages(self) -> bool:
        if self.hugepages is not None:
            return self.hugepages
        return os.geteuid() == 0 and free_hugepages_mb() >= self.memory_mb

    def args(self, pci=()) -> list[str]:
        """rte_eal_init's arguments (argv[0] included); pci: the NICs EAL may take (-a
        each: an address, with device arguments if any), none: --no-pci."""
        if self.use_hugepages():
            if os.geteuid() != 0:
                raise ValueError("hugepages: DPDK with hugepages needs root here (or hugepages=False)")
            if free_hugepages_mb() < self.memory_mb:
                raise ValueError(f"hugepages: {free_hugepages_mb()} MB of hugepages are free, "
                                 f"memory_mb is {self.memory_mb} (reserve more, or hugepages=False)")
            mem = ["--in-memory", "-m", str(self.memory_mb)]
        else:
            mem = ["--no-huge", "-m", str(self.memory_mb), "--no-shconf"]
        # one EAL lcore, spread over every CPU the caller may use: EAL sets the
        # caller's affinity to that set, i.e. leaves it as it is (and C restores it anyway)
        here = cpu_list(os.sched_getaffinity(0))
        plugins = ["-d", self.pmd_dir] if self.pmd_dir else []
        pci_args = [x for addr in pci for x in ("-a", addr)] or ["--no-pci"]
        return ["perfkit", *mem, *plugins, *pci_args, "--no-telemetry", f"--lcores=0@({here})",
                # the global level, and every log type's (EAL's own stay at info otherwise)
                f"--log-level={LOG_LEVELS[self.log_level]}", f"--log-level=*:{LOG_LEVELS[self.log_level]}",
                f"--file-prefix=perfkit{os.getpid()}"]


def runtime_dir(pid: int | None = None) -> str:
    """The folder EAL makes for this process's file prefix (perfkitPID): /var/run/dpdk/ for
    root, else $XDG_RUNTIME_DIR/dpdk/ (/tmp/dpdk/ without it), as DPDK 22.11 does."""
    base = "/var/run" if os.geteuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", f"perfkit{os.getpid() if pid is None else pid}")


def remove_runtime_dir(path: str) -> None:
    """At exit: EAL's runtime folder, empty with --in-memory and --no-shconf, goes (a folder
    with something in it stays: rmdir removes only an empty one)."""
    try:
        os.rmdir(path)
    except OSError:
        pass


def free_hugepages_mb() -> int:
    try:
        with open("/proc/meminfo") as f:
            info = dict(ln.split(":", 1) for ln in f if ":" in ln)
        free = int(info["HugePages_Free"].split()[0])
        size_kb = int(info["Hugepagesize"].split()[0])
        return free * size_kb // 1024
    except (OSError, KeyError, ValueError):
        return 0


_options = EalOptions()
_up_with: EalOptions | None = None
_args: list[str] | None = None
_up_pci: tuple[str, ...] = ()
SYSFS, DEV = "/sys", "/dev"   # where PCI devices and /dev/vfio are looked up (tests fake them)


def pci_of(ports) -> tuple[str, ...]:
    """The PCI devices (sorted, once each) that these port strings use."""
    return tuple(sorted({a for dev in ports for a in pci_port_addresses(dev)}))


def _allow(ports, pci) -> tuple[str, ...]:
    """EAL's -a values: a PCI port's own string (EAL probes the device at init, so its
    device arguments go there), a bond member's address."""
    own = {str(dev).split(",")[0]: str(dev) for dev in ports if str(dev).split(",")[0] in pci}
    return tuple(own.get(a, a) for a in pci)


def check_pci(pci, sysfs: str | None = None, dev: str | None = None) -> None:
    """Each PCI device is here and on a driver DPDK can use, before EAL starts: a failed
    rte_eal_init cannot be retried in the process. One line for what is wrong."""
    problems = [p for a in pci if (p := nics.dpdk_problem(a, sysfs or SYSFS, dev or DEV))]
    if problems:
        raise EngineError("; ".join(problems))


def configure(options: EalOptions | None = None, **fields) -> EalOptions:
    """Set EAL's options before first use; once EAL is up only the same options pass."""
    global _options
    opts = options if options is not None else EalOptions(**fields)
    if options is not None and fields:
        raise ValueError("configure: give an EalOptions or fields, not both")
    if _up_with is not None and opts != _up_with:
        raise EngineError(f"DPDK EAL is already up in this process with {_up_with}; "
                          "restart the kernel/process to change its options")
    _options = opts
    return opts


def eal(ports=()) -> list[str]:
    """EAL up (once per process) for these port strings (their PCI devices get -a, no
    --no-pci); returns the arguments it started with."""
    global _up_with, _args, _up_pci
    from perfkit import _dpdk  # the DPDK extension is built only where DPDK is installed
    pci = pci_of(ports)
    state = _dpdk.eal_state()
    missing = [a for a in pci if a not in _up_pci]
    if state == "up" and missing:
        check_pci(missing)
        raise EngineError(f"{', '.join(missing)}: DPDK EAL is already up in this process without it "
                          f"({' '.join(('-a ' + a for a in _up_pci)) or '--no-pci'}): EAL takes its PCI "
                          "devices when it starts; restart the kernel/process with this spec first")
    if state == "up" and _dpdk.pool_counts()[0]:
        return list(_args or [])
    if state == "up":  # EAL came up but its mbuf pool did not: try the pool again
        _dpdk.eal_init(list(_args or ["perfkit"]), _options.mbufs)
        return list(_args or [])
    if state == "failed":
        raise EngineError("DPDK EAL failed to initialise earlier in this process: "
                          "restart the kernel/process")
    opts = _options
    check_pci(pci)
    args = opts.args(_allow(ports, pci))
    if state != "failed":   # EAL makes its runtime folder at init, even one that fails
        atexit.register(remove_runtime_dir, runtime_dir())
    before = os.sched_getaffinity(0)
    try:
        _dpdk.eal_init(args, opts.mbufs)
    finally:
        if os.sched_getaffinity(0) != before:  # C restores it; never leave the caller pinned
            os.sched_setaffinity(0, before)
    _up_with, _args, _up_pci = opts, args, pci
    return list(args)


def status() -> dict:
    try:
        from perfkit import _dpdk
    except ImportError:
        return {"available": False,
                "detail": "not built: libdpdk was not found at build time "
                          "(Debian: apt install libdpdk-dev pkg-config, then reinstall perfkit)"}
    state = _dpdk.eal_state()
    if state == "failed":
        return {"available": False,
                "detail": f"{_dpdk.version()}: EAL failed to initialise in this process; restart it"}
    mode = "up" if state == "up" else "starts on first use"
    return {"available": True,
            "detail": f"{_dpdk.version()}: UDP flows (generator, rxonly, reverse, forward between two ports, bidirectional; "
                      f"address/port ranges, size mixes and IMIX, jumbo, ramps, latency probes, "
                      f"several queues and lcores) on vdev ports and ring:NAME:0|1 pairs; EAL {mode}"}


def resources() -> dict:
    """What the process holds in DPDK now: for leak checks after runs."""
    from perfkit import _dpdk
    size, free = _dpdk.pool_counts()
    mine, ethdevs = _dpdk.ports_open()
    return {"eal": _dpdk.eal_state(), "mbufs": size, "mbufs_free": free,
            "ports_open": mine, "ethdev_ports": ethdevs}


def eal_options() -> EalOptions:
    """What EAL was started with, or, before it starts, what it will be started with."""
    return _up_with or _options


def worker_cpu(i: int):
    cpus = (_up_with or _options).worker_cpus
    return cpus[i % len(cpus)] if cpus else -1


CSUM_ENV = "PERFKIT_DPDK_CSUM"   # "sw": every checksum in software even where the port offloads them


def csum_mode() -> str:
    """PERFKIT_DPDK_CSUM: "auto" (the default: the device sums where its port offers it) or "sw"."""
    mode = os.environ.get(CSUM_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "sw"):
        raise ValueError(f"{CSUM_ENV}: {mode!r} is not auto or sw")
    return mode


def use_csum_mode(port) -> None:
    """With PERFKIT_DPDK_CSUM=sw, the port's frames stop asking for tx checksum offloads
    (before any engine reads its setup, so its record says software)."""
    if csum_mode() == "sw":
        port.software_checksums()


def _open(ports: list, dev: str, ip: str, netns, queues: int = 1):
    from perfkit import _dpdk
    port = _dpdk.Port(dev, netns=netns, ip=ip, queues=queues)
    ports.append(port)
    use_csum_mode(port)
    say_setup(port)
    return port


_verbose = 0              # perfkit flows/reflect/dperf -v: each port's setup said when it opens
_say_to = None            # None: stderr, so --json rows on stdout stay JSON lines


def set_verbose(level: int, stream=None) -> None:
    """Say each DPDK port's setup (setup_line) when it opens, from now on (0: not)."""
    global _verbose, _say_to
    _verbose = int(level)
    _say_to = stream


def setup_line(dev: str, s: dict) -> str:
    """A port's setup (Port.setup) in one line: what the device reports and what was chosen."""
    off = s["offloads"]
    by = lambda keys: ", ".join(f"{k.split('_', 1)[1]} {off[k]}" for k in keys)  # noqa: E731
    rss = (f"RSS on ({s['rss_key']} key)" if s["rss"] else "RSS off")
    lo, hi, al = s["rx_desc_lim"]
    tlo, thi, tal = s["tx_desc_lim"]
    return (f"port {dev}: driver {s['driver']}, {s['queues']} queue(s) of {s['max_rx_queues']}, {rss}; "
            f"rx {by(('rx_ipv4_cksum', 'rx_udp_cksum', 'rx_tcp_cksum'))}; "
            f"tx {by(('tx_ipv4_cksum', 'tx_udp_cksum', 'tx_tcp_cksum', 'tx_tcp_tso'))}; "
            f"MTU {s['mtu']}" + (f" (asked {s['mtu_asked']})" if s["mtu_asked"] else "") +
            f", max_rx_pktlen {s['max_rx_pktlen']}; descriptors rx {s['rx_desc']} ({lo}..{hi} by {al}), "
            f"tx {s['tx_desc']} ({tlo}..{thi} by {tal})")


def say_setup(port) -> None:
    if _verbose:
        print(setup_line(port.dev, port.setup), file=_say_to or sys.stderr, flush=True)


def run_environment(handle) -> dict:
    """What a run records beside its environment: each port's setup (Port.setup), by its string."""
    return {"ports": [{"dev": p.dev, **p.setup} for p in getattr(handle, "port_list", ())]}


MEMIF_WAIT_S = 5.0        # a generator's memif link must be up this soon (it takes ~10 ms here)
MEMIF_RECONNECT_S = 1.0   # a memif client still down this long connects again
MEMIF_REFUSED_S = 0.25    # ... and, refused (the server still holds the old connection), tries again this soon


def wait_memif(ports) -> None:
    """A generator on a memif client waits (bounded) for the server to connect, rather
    than start sending into a link that is down. A client whose handshake has not finished
    within MEMIF_RECONNECT_S connects again: a handshake that stalled starts over. A
    reconnect the server refuses is tried again until the wait ends."""
    deadline = time.monotonic() + MEMIF_WAIT_S
    for p in ports:
        if not p.dev.startswith("net_memif"):
            continue
        client = "role=client" in p.dev
        retry_at, refused = time.monotonic() + MEMIF_RECONNECT_S, None
        while not p.link_up:
            now = time.monotonic()
            if now > deadline:
                raise EngineError(f"port {p.dev}: the memif link did not come up in {MEMIF_WAIT_S:g} s: "
                                  "is the other side (role=server / role=client) running on the same "
                                  "socket file?" + (f" (last reconnect: {refused})" if refused else ""))
            if client and now > retry_at:
                try:
                    p.reconnect()
                    retry_at, refused = now + MEMIF_RECONNECT_S, None
                except EngineError as exc:
                    retry_at, refused = now + MEMIF_REFUSED_S, exc
            time.sleep(0.01)


def build(plan) -> EngineHandle:
    """Open the plan's ports and make its engine (not started); a spec is made into its
    kind's plan. The handle closes the ports when it is closed."""
    plan = as_plan(plan)
    if plan.get("engine") != NAME:
        raise ValueError(f"engine: dpdk runs DpdkFlows and DpdkReflect specs, not {plan.get('spec')}")
    port_plan, workers = plan["ports"], [dict(w) for w in plan["workers"]]
    csum_mode()   # a bad value: one line before EAL starts
    eal([dev for dev, _ in port_plan])
    from perfkit import _dpdk
    ports: list = []
    try:
        for dev, ip in port_plan:
            _open(ports, dev, ip, plan["netns"], plan["queues"])
        if plan["wait_memif"]:
            wait_memif(ports)
        for i, w in enumerate(workers):
            w["cpu"] = worker_cpu(i)
        return _dpdk.DpdkEngine(ports, workers, own_ports=True)
    except BaseException:
        for p in reversed(ports):
            p.close()
        raise


def detail() -> dict:
    out = {"engine": NAME}
    try:
        from perfkit import _dpdk
        out["dpdk"] = _dpdk.version()
        out["eal_args"] = list(_args or [])
        out["eal_options"] = asdict(_up_with or _options)
    except ImportError:
        pass
    return out
