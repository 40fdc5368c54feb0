# cython: language_level=3
"""Thin Cython face of the DPDK engine (dpdk_engine.c).

EAL is initialised once per process (eal_init); ports are opened from vdev
strings (Port) and handed to an engine (DpdkEngine), whose workers run in
C threads registered with DPDK and never take the GIL. perfkit.engines.dpdk
builds all of this from a validated spec; this module checks little itself.
"""
from cpython cimport array
import array as _array
import ipaddress
import threading

from perfkit.errors import EngineError

from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport uint8_t, uint32_t, uint64_t

from pk_common cimport PK_NCOUNTERS, PK_HIST_BUCKETS
from pk_dpdk cimport *

include "engine_base.pxi"

# the worker configuration keys DpdkEngine copies into pk_dpdk_worker_cfg (check_worker_keys)
WORKER_KEYS = frozenset((
    "role", "port", "out", "peer", "track", "size", "sizes", "flows", "burst", "rate", "rate_end", "ramp",
    "duration", "dst_mac", "dst_ip", "sport", "dport", "cpu", "drop_every", "src_ips", "dst_ips", "sports",
    "dports", "queue", "flow_first", "probe_rate", "probe_size", "with_worker", "pause",
    "flows_start", "flow_rate", "rx_cap", "count", "peer_back"))

cdef extern from "rte_version.h":
    const char *rte_version()

ROLES = {"dpdk_send": PK_DPDK_GEN, "dpdk_recv": PK_DPDK_RXONLY, "dpdk_reflect": PK_DPDK_REVERSE,
         "dpdk_forward": PK_DPDK_FORWARD}
MAX_WORKERS = PK_DPDK_MAX_WORKERS
MAX_FLOWS = PK_DPDK_MAX_FLOWS
MAX_BURST = PK_DPDK_MAX_BURST
MIN_SIZE = PK_DPDK_MIN_SIZE
MAX_SIZE = PK_DPDK_MAX_SIZE
MAX_JUMBO = PK_DPDK_MAX_JUMBO
MAX_PATTERN = PK_DPDK_MAX_PATTERN
MAX_QUEUES = PK_DPDK_MAX_QUEUES


def version():
    """The DPDK version string this extension was built against."""
    return rte_version().decode()


def eal_init(list args, unsigned int mbufs):
    """rte_eal_init(args) once per process (args[0] is the program name), then
    the process-wide mbuf pool. Raises EngineError; after a failed init every
    later call fails too (EAL cannot be initialised twice)."""
    cdef char err[512]
    cdef int n = len(args), i, rc
    cdef const char **argv = <const char **>calloc(n + 1, sizeof(char *))
    if argv == NULL:
        raise MemoryError()
    encoded = [a.encode() for a in args]
    try:
        for i in range(n):
            argv[i] = <const char *>encoded[i]
        err[0] = 0
        with nogil:
            rc = pk_dpdk_eal_init(n, argv, mbufs, err, sizeof(err))
        if rc != 0:
            raise EngineError(err.decode(errors="replace"))
    finally:
        free(argv)


def eal_state():
    """'down' (not initialised yet), 'up' or 'failed' (restart the process)."""
    return {0: "down", 1: "up", -1: "failed"}[pk_dpdk_eal_state()]


def pool_counts():
    """(size, free) of the process-wide mbuf pool; (0, 0) before EAL init."""
    cdef uint32_t size = 0, avail = 0
    pk_dpdk_pool_counts(&size, &avail)
    return size, avail


def ports_open():
    """Ports perfkit has open now, and ethdev ports DPDK knows about."""
    return pk_dpdk_ports_open(), pk_dpdk_ethdev_count()


def tsc_hz():
    return pk_dpdk_tsc_hz()


def memif_control_held():
    """True while EAL's interrupt thread is held for a worker polling a connected memif port
    (the PMD's disconnect handling waits until no worker polls it)."""
    return bool(pk_dpdk_ctl_parked())


# the offloads port setup takes where the device offers them (rte_ethdev.h's bits)
RX_OFFLOADS = {"rx_ipv4_cksum": 1 << 1, "rx_udp_cksum": 1 << 2, "rx_tcp_cksum": 1 << 3}
TX_OFFLOADS = {"tx_ipv4_cksum": 1 << 1, "tx_udp_cksum": 1 << 2, "tx_tcp_cksum": 1 << 3, "tx_tcp_tso": 1 << 5}
RX_OFFLOAD_SCATTER = 1 << 13


def desc_fit(int n, int nb_min, int nb_max, int nb_align):
    """n descriptors as port setup fits them to a device's rx_desc_lim/tx_desc_lim."""
    return pk_dpdk_desc_fit(n, nb_min, nb_max, nb_align)


cdef dict _dev_info_dict(pk_dpdk_port_setup *s):
    return {"driver": s.driver.decode(errors="replace"), "max_rx_queues": s.max_rx_queues,
            "max_tx_queues": s.max_tx_queues, "hash_key_size": s.hash_key_size,
            "flow_type_rss_offloads": s.flow_type_rss_offloads, "rx_offload_capa": s.rx_offload_capa,
            "tx_offload_capa": s.tx_offload_capa, "min_mtu": s.min_mtu, "max_mtu": s.max_mtu,
            "max_rx_pktlen": s.max_rx_pktlen,
            "rx_desc_lim": (s.rx_desc_min, s.rx_desc_max, s.rx_desc_align),
            "tx_desc_lim": (s.tx_desc_min, s.tx_desc_max, s.tx_desc_align)}


cdef uint32_t _ip4(object addr) except? 0:
    """An IPv4 address in network order, as a uint32 in memory order."""
    cdef uint32_t v = 0
    packed = ipaddress.IPv4Address(addr).packed
    memcpy(&v, <const char *>packed, 4)
    return v


cdef class Port:
    """One DPDK port: a vdev string (net_null0, net_ring0, net_af_packet0,iface=X, ...)
    probed by rte_dev_probe, or ring:NAME:0 / ring:NAME:1, the ends of an in-process
    ring pair. ip: the port's own IPv4 address (answered for ARP and ICMP echo).
    netns: probe inside this network namespace file (af_packet binds there).
    queues: rx and tx queues (a ring pair's two ends: as many on both).
    mtu: the MTU to set (None: the device's own), within what the device takes.
    Setup follows what the device reports (rte_eth_dev_info); `setup` says what it chose."""
    cdef pk_dpdk_port *p
    cdef readonly str dev
    cdef readonly object ip

    def __cinit__(self, str dev, str netns=None, ip=None, int queues=1, mtu=None):
        cdef char err[512]
        self.p = NULL
        self.dev = dev
        self.ip = None
        bdev = dev.encode()
        bns = (netns or "").encode()
        cdef const char *cdev = bdev
        cdef const char *cns = bns
        cdef int cmtu = 0 if mtu is None else int(mtu)
        err[0] = 0
        with nogil:
            self.p = pk_dpdk_port_open_cfg(cdev, cns, queues, cmtu, err, sizeof(err))
        if self.p == NULL:
            raise EngineError(err.decode(errors="replace"))
        if ip is not None:
            self.set_ip(ip)

    def __dealloc__(self):
        cdef pk_dpdk_port *p = self.p
        self.p = NULL
        if p != NULL and not pk_dpdk_port_busy(p):
            with nogil:
                pk_dpdk_port_close(p)

    cdef pk_dpdk_port *_live(self) except NULL:
        if self.p == NULL:
            raise EngineError(f"port {self.dev} is closed")
        return self.p

    @property
    def closed(self):
        return self.p == NULL

    @property
    def name(self):
        return pk_dpdk_port_name(self._live()).decode()

    @property
    def port_id(self):
        return pk_dpdk_port_id(self._live())

    @property
    def mac(self):
        cdef uint8_t m[6]
        pk_dpdk_port_mac(self._live(), m)
        return ":".join(f"{m[i]:02x}" for i in range(6))

    @property
    def link_up(self):
        """True once the link is up (memif: the peer has connected); None if unknown."""
        rc = pk_dpdk_port_link(self._live())
        return None if rc < 0 else bool(rc)

    def reconnect(self):
        """memif, no engine on it: drop the control connection and connect again."""
        cdef pk_dpdk_port *p = self._live()
        cdef char err[512]
        cdef int rc
        err[0] = 0
        with nogil:
            rc = pk_dpdk_port_reconnect(p, err, sizeof(err))
        if rc != 0:
            raise EngineError(err.decode(errors="replace"))

    @property
    def queues(self):
        return pk_dpdk_port_queues(self._live())

    @property
    def rss(self):
        """True where the PMD spreads received flows over the queues by RSS."""
        return bool(pk_dpdk_port_rss(self._live()))

    @property
    def setup(self):
        """What port setup chose from what the device reports: driver, queues, RSS (key:
        "symmetric", 0x6d5a repeated, so both directions of a flow hash alike; "pmd": the
        PMD's own; None), each checksum/TSO offload done by the "device" or in "software"
        ("off": TSO, which perfkit does not do itself), MTU, rx/tx descriptors, and the
        limits they were fitted to (max_rx_pktlen, descriptor limits)."""
        cdef pk_dpdk_port_setup s
        pk_dpdk_port_get_setup(self._live(), &s)
        out = _dev_info_dict(&s)
        off = {k: "device" if s.rx_offloads & b else "software" for k, b in RX_OFFLOADS.items()}
        off.update({k: "device" if s.tx_offloads & b else "software" for k, b in TX_OFFLOADS.items()})
        off["tx_tcp_tso"] = "device" if s.tx_offloads & TX_OFFLOADS["tx_tcp_tso"] else "off"
        out.update({
            "queues": s.queues, "rss": bool(s.rss),
            "rss_key": {0: None, 1: "symmetric", 2: "pmd"}[s.rss_key],
            "rss_hf": s.rss_hf, "offloads": off,
            "rx_offloads": s.rx_offloads, "tx_offloads": s.tx_offloads,
            "mtu": s.mtu, "mtu_asked": s.mtu_asked or None,
            "jumbo_rx": ("scatter" if s.rx_offloads & RX_OFFLOAD_SCATTER else
                         "jumbo pool" if s.rx_pool_jumbo else None),
            "rx_desc": s.nb_rxd, "tx_desc": s.nb_txd})
        return out

    def software_checksums(self):
        """From now on no frame asks the device for a tx offload: engines built on the port and
        send(csum=True) sum in software (PERFKIT_DPDK_CSUM=sw); setup then says "software"."""
        pk_dpdk_port_tx_offloads_unused(self._live())

    def dev_info(self):
        """What the device reports now (a fresh rte_eth_dev_info_get): driver, queue, offload,
        MTU, RSS and descriptor limits."""
        cdef pk_dpdk_port_setup s
        if pk_dpdk_port_dev_info(self._live(), &s) != 0:
            raise EngineError(f"port {self.dev}: rte_eth_dev_info_get failed")
        return _dev_info_dict(&s)

    @property
    def busy(self):
        return bool(pk_dpdk_port_busy(self._live()))

    def set_ip(self, ip):
        pk_dpdk_port_set_ip(self._live(), _ip4(ip))
        self.ip = str(ipaddress.IPv4Address(ip))

    def stats(self):
        """The PMD's own counters (rte_eth_stats_get)."""
        cdef uint64_t out[5]
        if pk_dpdk_port_stats(self._live(), out) != 0:
            raise EngineError(f"port {self.dev}: rte_eth_stats_get failed")
        return dict(zip(("ipackets", "opackets", "ierrors", "oerrors", "imissed"),
                        [out[i] for i in range(5)]))

    def kernel_missed(self):
        """af_packet, af_xdp: frames the kernel dropped because this port's receiver fell
        behind (tp_drops, rx_ring_full), since it opened; DPDK 22.11 leaves them out of
        imissed, the engines' nic_imissed adds them. 0 for other ports."""
        return pk_dpdk_port_kernel_missed(self._live())

    def send(self, frames, bint csum=False):
        """Send raw Ethernet frames (bytes, without FCS) from this thread; returns
        how many the port took. For tests and diagnostics; not while an engine runs.
        csum: fill in each IPv4 frame's IPv4 and UDP/TCP checksums, by the device where
        setup enabled that offload, else in software."""
        cdef pk_dpdk_port *p = self._live()
        frames = [bytes(f) for f in frames]
        if not frames:
            return 0
        blob = b"".join(frames)
        cdef array.array lens = _array.array("I", [len(f) for f in frames])
        cdef const unsigned char[:] view = blob
        rc = pk_dpdk_port_send_csum(p, &view[0] if len(blob) else NULL,
                                    <const uint32_t *>lens.data.as_voidptr, len(frames), csum)
        if rc < 0:
            raise EngineError(f"port {self.dev} is in use by an engine")
        return rc

    def recv(self, int max=64):
        """Up to max frames waiting on the port, as bytes (one rx burst)."""
        cdef pk_dpdk_port *p = self._live()
        if max < 1 or max > 64:
            raise ValueError(f"max: 1..64, not {max}")
        cdef size_t cap = 64 * 16384
        buf = bytearray(cap)
        cdef unsigned char[:] view = buf
        cdef array.array lens = _array.array("I", [0] * max)
        n = pk_dpdk_port_recv(p, &view[0], cap, <uint32_t *>lens.data.as_voidptr, max)
        if n < 0:
            raise EngineError(f"port {self.dev} is in use by an engine")
        out, off = [], 0
        for i in range(n):
            out.append(bytes(buf[off:off + lens[i]]))
            off += lens[i]
        return out

    def close(self):
        """Drain, stop, close and unplug the port (not while an engine uses it)."""
        cdef pk_dpdk_port *p = self.p
        if p == NULL:
            return
        if pk_dpdk_port_busy(p):
            raise EngineError(f"port {self.dev} is in use by an engine: close the engine first")
        self.p = NULL
        with nogil:
            pk_dpdk_port_close(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.p == NULL else f"port {self.port_id} {self.mac}"
        return f"<perfkit._dpdk.Port {self.dev!r} {state}>"


cdef class DpdkEngine(EngineBase):
    """Workers over open ports, as dicts: role (dpdk_send | dpdk_recv | dpdk_reflect),
    port (index into ports), peer (index of the receiving worker, dpdk_send), track
    (dpdk_send: frames come back), size, flows, burst, rate (frames/s, 0 = unlimited),
    duration (s), dst_mac, dst_ip, sport, dport, cpu, drop_every (tests: a lossy receiver),
    src_ips, dst_ips, sports (0 = flows), dports: the ranges flows are spread over
    (dpdk_reflect: dst_ips = addresses from its port's it reflects for), queue (of its port),
    flow_first (dpdk_send: its flows are flow ids flow_first ..), sizes (frame sizes
    sent in turn, instead of size), rate_end and ramp (s): the rate rises from rate to rate_end.
    dpdk_forward: every frame received on (port, queue) leaves by (out, queue), untouched, or
    with dst_mac: destination dst_mac, source the out port's MAC; with_worker: the index of
    the other direction's dpdk_forward worker, run by this worker's thread (one lcore).
    dpdk_reflect with out: the reflected frames leave by (out, queue), with the out port's MAC as
    source (and dst_mac, when given, as destination). dpdk_send with peer_back: its peer receives
    on this side's own second port what a far end sends back; the destination MAC by ARP.
    With own_ports, close() closes the ports too."""
    cdef pk_dpdk_engine *e
    cdef list ports
    cdef bint own_ports
    cdef list links
    cdef list dst_ips

    def __cinit__(self, list ports, list workers, bint own_ports=False):
        cdef char err[512]
        cdef int i
        cdef pk_dpdk_worker_cfg *cfgs
        cdef pk_dpdk_port **cports
        self.e = NULL
        self.ports = list(ports)
        self.own_ports = own_ports
        self.n = len(workers)
        if not 0 < self.n <= PK_DPDK_MAX_WORKERS:
            raise ValueError(f"workers: between 1 and {PK_DPDK_MAX_WORKERS}, not {self.n}")
        cfgs = <pk_dpdk_worker_cfg *>calloc(self.n, sizeof(pk_dpdk_worker_cfg))
        cports = <pk_dpdk_port **>calloc(len(self.ports) + 1, sizeof(pk_dpdk_port *))
        if cfgs == NULL or cports == NULL:
            free(cfgs)
            free(cports)
            raise MemoryError()
        try:
            for i, port in enumerate(self.ports):
                cports[i] = (<Port>port)._live()
            self.roles = []
            self.links = []
            self.dst_ips = []
            for i, w in enumerate(workers):
                check_worker_keys(w, WORKER_KEYS, "DPDK engine")
                self.roles.append(w["role"])
                self.links.append((w["port"], w.get("out", -1)))
                self.dst_ips.append(w.get("dst_ip", "198.18.0.2"))
                cfgs[i].role = ROLES[w["role"]]
                cfgs[i].port = w["port"]
                cfgs[i].peer = w.get("peer", -1)
                cfgs[i].track = int(w.get("track") or 0)
                cfgs[i].size = w.get("size", 64)
                cfgs[i].flows = w.get("flows", 1)
                cfgs[i].burst = w.get("burst", 32)
                cfgs[i].rate = w.get("rate", 0.0)
                cfgs[i].duration_ns = <unsigned long long>(w.get("duration", 1.0) * 1e9)
                mac = w.get("dst_mac")
                if mac:
                    raw = bytes(int(x, 16) for x in mac.split(":"))
                    memcpy(cfgs[i].dst_mac, <const char *>raw, 6)
                    cfgs[i].dst_mac_set = 1
                cfgs[i].dst_ip = _ip4(w.get("dst_ip", "198.18.0.2"))
                cfgs[i].sport = w.get("sport", 10000)
                cfgs[i].dport = w.get("dport", 9)
                cfgs[i].cpu = w.get("cpu", -1)
                cfgs[i].drop_every = w.get("drop_every", 0)
                cfgs[i].src_ips = w.get("src_ips", 1)
                cfgs[i].dst_ips = w.get("dst_ips", 1)
                cfgs[i].sports = w.get("sports", 0)
                cfgs[i].dports = w.get("dports", 1)
                sizes = w.get("sizes") or ()
                if len(sizes) > PK_DPDK_MAX_PATTERN:
                    raise ValueError(f"sizes: at most {PK_DPDK_MAX_PATTERN} frames in a pattern")
                for k, sz in enumerate(sizes):
                    cfgs[i].sizes[k] = sz
                cfgs[i].nsizes = len(sizes)
                cfgs[i].rate_end = w.get("rate_end", 0.0)
                cfgs[i].queue = w.get("queue", 0)
                cfgs[i].flow_first = w.get("flow_first", 0)
                cfgs[i].probe_rate = w.get("probe_rate", 0.0)
                cfgs[i].probe_size = w.get("probe_size", 128)
                cfgs[i].ramp_ns = <unsigned long long>(w.get("ramp", 0.0) * 1e9)
                cfgs[i].out_port = w.get("out", -1)
                cfgs[i].with_worker = w.get("with_worker", -1)
                cfgs[i].pause_ns = <unsigned long long>(w.get("pause", 0.0) * 1e9)
                cfgs[i].flows_start = w.get("flows_start", 0)
                cfgs[i].flow_rate = w.get("flow_rate", 0.0)
                cfgs[i].rx_cap = w.get("rx_cap", 0.0)
                cfgs[i].count = w.get("count") or 0
                cfgs[i].peer_back = int(w.get("peer_back") or 0)
            err[0] = 0
            self.e = pk_dpdk_create(cports, len(self.ports), cfgs, self.n, err, sizeof(err))
            if self.e == NULL:
                raise EngineError(err.decode(errors="replace"))
        finally:
            free(cfgs)
            free(cports)

    cdef void _destroy(self):
        cdef pk_dpdk_engine *e = self.e
        self.e = NULL   # closed before the GIL is let go: snapshot() in another thread sees it closed
        if e != NULL:
            with nogil:
                pk_dpdk_destroy(e)

    def __dealloc__(self):
        self._destroy()

    cdef pk_dpdk_engine *_live(self) except NULL:
        if self.e == NULL:
            raise EngineError("the engine is closed")
        return self.e

    cdef bint _is_open(self):
        return self.e != NULL

    cdef int _c_start(self, char *err, size_t errlen) except -2:
        return pk_dpdk_start(self.e, err, errlen)

    cdef void _c_stop(self):
        pk_dpdk_stop(self.e)

    cdef object _c_running(self):
        return pk_dpdk_running(self.e)

    cdef void _c_join(self) noexcept nogil:
        pk_dpdk_join(self.e)

    cdef void _c_snapshot(self, int i, uint64_t *counters, uint64_t *hist):
        pk_dpdk_snapshot(self.e, i, counters, hist)

    cdef object _c_error(self):
        cdef const char *msg = pk_dpdk_error(self.e)
        return None if msg == NULL else msg.decode(errors="replace")

    def settle_remote(self, int worker, sent):
        """After join: what a sender in another process sent per flow id (its flow_sent);
        frames of those that never arrived count as lost (seq_lost of this worker)."""
        cdef array.array a = _array.array("Q", sent)
        cdef pk_dpdk_engine *e = self._live()
        if pk_dpdk_settle_remote(e, worker, <const uint64_t *>a.data.as_voidptr, len(a)) != 0:
            raise EngineError(f"settle_remote: worker {worker} is not a joined port's first receiver")

    def probe_histograms(self):
        """The latency probes' histogram of every worker, as array('Q')."""
        cdef pk_dpdk_engine *e = self._live()
        cdef array.array h
        cdef int i
        out = []
        for i in range(self.n):
            h = array.clone(_array.array("Q"), PK_HIST_BUCKETS, zero=True)
            pk_dpdk_probe_hist(e, i, <uint64_t *>h.data.as_voidptr)   # with the GIL, as snapshot()
            out.append(h)
        return out

    def summary_extra(self):
        """Summary fields beyond the shared ones: the latency probes (count, loss is in
        the load's, mean/percentiles/max in microseconds), when any were sent; forward: per
        direction of a forwarder, its counts (forward_counts); warnings: ARP requests nobody
        answered (arp_failures)."""
        from perfkit.stats import COUNTER_NAMES, Histogram, latency_fields
        tot = dict.fromkeys(("probe_tx", "probe_rx", "probe_lat_sum_ns"), 0)
        lo, hi = 0, 0
        for c, _ in self.snapshot():
            c = dict(zip(COUNTER_NAMES, c))
            for k in tot:
                tot[k] += c[k]
            if c["probe_lat_min_ns"] and (not lo or c["probe_lat_min_ns"] < lo):
                lo = c["probe_lat_min_ns"]
            hi = max(hi, c["probe_lat_max_ns"])
        out = self._forward_summary()
        out.update(self._p9999())
        warnings = self.arp_failures()
        if warnings:
            out["warnings"] = warnings
        if not tot["probe_tx"]:
            return out
        hist = Histogram.merge(self.probe_histograms())
        lat = latency_fields(hist, tot["probe_rx"], tot["probe_lat_sum_ns"], 0, lo, hi)
        out.update({"probe_tx": tot["probe_tx"], "probe_rx": tot["probe_rx"]})
        out.update({"probe_" + k: v for k, v in lat.items() if k != "jitter_us"})
        out.update(self._p9999(hist, lo, hi, "probe_"))
        return out

    def _p9999(self, hist=None, lo=0, hi=0, prefix=""):
        """p99.99 (one of p50 .. p99.99 and max) of the load's latencies, or of the probes' given
        their histogram, clamped to the exact min/max as latency_fields does; {} without samples."""
        from perfkit.stats import COUNTER_NAMES, Histogram
        if hist is None:
            snaps = self.snapshot()
            hist = Histogram.merge(h for _, h in snaps)
            for c, _ in snaps:
                c = dict(zip(COUNTER_NAMES, c))
                if c["lat_min_ns"] and (not lo or c["lat_min_ns"] < lo):
                    lo = c["lat_min_ns"]
                hi = max(hi, c["lat_max_ns"])
        v = hist.percentile(0.9999)
        if v is None:
            return {}
        if hi:
            v = min(max(v, lo), hi)
        return {f"{prefix}lat_p9999_us": v / 1e3}

    def arp_failures(self):
        """One line per port and address a generator asked for by ARP and got no answer
        (it then sent to broadcast): which address, on which port, and what to check."""
        out = []
        for i, role in enumerate(self.roles):
            got = self.dst_mac(i) if role == "dpdk_send" else None
            if not got or not got[1]:
                continue
            port = self.ports[self.links[i][0]]
            msg = (f"port {port.dev}: nobody answered ARP for {self.dst_ips[i]} (asked from {port.ip}, "
                   f"{port.mac}, for 1 s); its frames went to broadcast ff:ff:ff:ff:ff:ff. Check that the far "
                   f"end is up and has {self.dst_ips[i]} (perfkit reflect --ip {self.dst_ips[i]}, or the host's "
                   "address), that it is on this port's link (a lab host: the same --netns and interface), "
                   "or give its MAC (--dst-mac)")
            if msg not in out:
                out.append(msg)
        return out

    def forward_counts(self):
        """Per direction of dpdk_forward workers (queues summed): the receiving port, the
        sending port, frames received, forwarded, dropped at a full tx queue (drop_tx),
        too short to rewrite (bad_rx), and the receiving port's NIC counters."""
        from perfkit.stats import COUNTER_NAMES
        dirs = {}
        for (c, _), role, (port, out) in zip(self.snapshot(), self.roles, self.links):
            if role != "dpdk_forward":
                continue
            c = dict(zip(COUNTER_NAMES, c))
            d = dirs.setdefault((port, out), {"from": self.ports[port].dev, "to": self.ports[out].dev,
                                              "rx": 0, "fwd": 0, "drop_tx": 0, "bad_rx": 0,
                                              "nic_imissed": 0, "nic_ierrors": 0, "nic_oerrors": 0})
            for k, name in (("rx", "pkts_rx"), ("fwd", "pkts_tx"), ("drop_tx", "drop_tx"), ("bad_rx", "bad_rx"),
                            ("nic_imissed", "nic_imissed"), ("nic_ierrors", "nic_ierrors"),
                            ("nic_oerrors", "nic_oerrors")):
                d[k] += c[name]
        return list(dirs.values())

    def _forward_summary(self):
        dirs = self.forward_counts()
        return {"forward": dirs} if dirs else {}

    def set_rate(self, double rate):
        """A new target for every dpdk_send worker while it runs: rate frames/s each (0 = as fast
        as the port takes them). Each takes it at its next burst and paces from there (a ramp
        ends); the rate_target gauge follows. The caller checks the value (perfkit.run.Run.set_rate)."""
        cdef pk_dpdk_engine *e = self._live()
        cdef int i
        gens = [i for i, role in enumerate(self.roles) if role == "dpdk_send"]
        if not gens:
            raise EngineError("set_rate: this engine has no generator")
        for i in gens:
            if pk_dpdk_set_rate(e, i, rate) != 0:
                raise ValueError(f"set_rate: {rate!r} frames/s per generator is out of range 0..1e10")

    def _set_rx_cap(self, double cap):
        """Tests: every dpdk_recv worker takes at most cap frames/s from now on (its rx_cap)."""
        cdef pk_dpdk_engine *e = self._live()
        cdef int i
        for i, role in enumerate(self.roles):
            if role == "dpdk_recv" and pk_dpdk_set_rx_cap(e, i, cap) != 0:
                raise ValueError(f"rx_cap: {cap!r} is out of range 0..1e10")

    def flows_seen(self, int worker):
        """After join: the load flows that had at least one frame in at this receiving worker's port
        (worker: the port's first receiver, the owner of its flow table), else None."""
        n = pk_dpdk_flows_seen(self._live(), worker)
        return None if n < 0 else n

    def flow_sent(self, int worker):
        """A dpdk_send worker's frames sent per flow (its next sequence numbers)."""
        cdef pk_dpdk_engine *e = self._live()
        out = array.clone(_array.array("Q"), PK_DPDK_MAX_FLOWS, zero=True)
        n = pk_dpdk_flow_sent(e, worker, <uint64_t *>(<array.array>out).data.as_voidptr,
                              PK_DPDK_MAX_FLOWS)
        return list(out[:n])

    def dst_mac(self, int worker):
        """(mac, broadcast_fallback) a dpdk_send worker sends to; None for other roles."""
        cdef uint8_t m[6]
        rc = pk_dpdk_dst_mac(self._live(), worker, m)
        if rc < 0:
            return None
        return ":".join(f"{m[i]:02x}" for i in range(6)), bool(rc)

    @property
    def port_list(self):
        return list(self.ports)

    cdef _closed(self):
        """After close(): with own_ports, close the ports too."""
        if self.own_ports:
            ports, self.ports = self.ports, []
            for p in reversed(ports):
                p.close()


include "tcp.pxi"
