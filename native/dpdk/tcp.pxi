# perfkit's DPDK TCP (tcp_engine.c), included into _dpdk.pyx: the same EAL, pool and ports.
from pk_dpdk_tcp cimport *

TCP_ROLES = {"server": PK_TCP_SERVER, "client": PK_TCP_CLIENT}


cdef uint32_t _ip4_host(object addr) except? 0:
    return int(ipaddress.IPv4Address(addr))


cdef void _ip6_put(uint8_t *out, object addr, int n=16):
    packed = ipaddress.IPv6Address(addr).packed
    memcpy(out, <const char *>packed, n)


# the worker configuration keys TcpEngine copies into pk_tcp_cfg (check_worker_keys)
TCP_WORKER_KEYS = frozenset((
    "role", "ip", "server_ip", "gateway_ip", "gateway_mac", "clients", "listen", "listen_num", "lport_range",
    "mss", "tos", "vlan", "tcp_rst", "rto", "retries", "burst", "duration", "msg", "keepalive", "cps", "cc",
    "ka_interval", "ka_requests", "launch_num", "slow_start", "wait", "fast_close", "flood", "cpu",
    "port", "queue", "own",
    "disable_ack", "raw", "udp", "pipeline", "dips", "vxlan"))


cdef class TcpEngine(EngineBase):
    """TCP workers (an HTTP server or client) on one open Port, from a dict:
    role (server | client), ip, server_ip, gateway_ip, gateway_mac, clients
    [(first, count)], listen, listen_num, lport_range, mss, tos, tcp_rst, rto (s),
    retries, burst, duration (s), msg (bytes: the response or the request),
    keepalive (server: bool), cps, cc, ka_interval (s), ka_requests, launch_num,
    slow_start (s), wait (s), fast_close, cpu, own [(first, count)] (further addresses
    answered for), pipeline (udp client: requests out a socket), dips [IPv4 address] (a
    flood's destinations in turn, dperf's change_dip),
    vxlan {vni, inner_smac, inner_dmac, local, remote} (this worker's VTEPs) -- or a list of such dicts, one worker each (their own sockets, ports and
    counters). port: one open Port or a list of them; a worker's "port" is its index in the
    list (default 0) and "queue" its queue there (default: the next one of that port); a
    port's queue 0 comes first among its workers. With own_ports, close() closes the ports.
    The Run handle interface: start stop running join snapshot error close roles."""
    cdef pk_tcp_engine *es[PK_DPDK_MAX_QUEUES]
    cdef list ports
    cdef bint own_ports
    cdef list msgs
    cdef list where

    def __cinit__(self, port, c, bint own_ports=False):
        ports = [port] if isinstance(port, Port) else list(port)
        if not ports or not all(isinstance(p, Port) for p in ports):
            raise TypeError("port: an open Port or a list of them")
        self.ports = ports
        self.own_ports = own_ports
        self.msgs = []
        self.where = []
        cfgs = [c] if isinstance(c, dict) else list(c)
        if not 1 <= len(cfgs) <= PK_DPDK_MAX_QUEUES * len(ports):
            raise ValueError(f"workers: 1..{PK_DPDK_MAX_QUEUES} a port, one per queue")
        self.roles = []
        nextq = [0] * len(ports)
        try:
            for w in cfgs:
                k = w.get("port", 0)
                if not isinstance(k, int) or not 0 <= k < len(ports):
                    raise ValueError(f"port: {k!r} is not an index of the {len(ports)} ports")
                q = w.get("queue", nextq[k])
                if q != nextq[k]:
                    raise ValueError(f"queue: {q} on port {k}: its queues come in order from 0 (next: {nextq[k]})")
                nextq[k] += 1
                self._add(ports[k], w, q)
                self.where.append((k, q))
        except BaseException:
            self._destroy()
            raise

    cdef _add(self, Port port, dict c, int q):
        cdef char err[512]
        cdef pk_tcp_cfg cfg
        cdef const unsigned char[:] view
        cdef const unsigned int[:] dview
        cdef const unsigned char[:] v6view
        check_worker_keys(c, TCP_WORKER_KEYS, "DPDK TCP engine")
        memset(&cfg, 0, sizeof(cfg))
        role = c["role"]
        cfg.role = TCP_ROLES[role]
        cfg.queue = q
        v6 = ipaddress.ip_address(c["ip"]).version == 6
        if v6:      # ip IPv6: every address is; a client address is its first 12 bytes + a low 32
            cfg.ipv6 = 1
            _ip6_put(cfg.ip6, c["ip"])
            _ip6_put(cfg.server_ip6, c.get("server_ip", c["ip"]))
            _ip6_put(cfg.gateway_ip6, c.get("gateway_ip") or c.get("server_ip", c["ip"]))
        else:
            cfg.ip = _ip4(c["ip"])
            cfg.server_ip = _ip4(c.get("server_ip", c["ip"]))
            cfg.gateway_ip = _ip4(c.get("gateway_ip") or c.get("server_ip", c["ip"]))
        mac = c.get("gateway_mac")
        if mac:
            raw = bytes(int(x, 16) for x in mac.split(":"))
            memcpy(cfg.gateway_mac, <const char *>raw, 6)
            cfg.gateway_mac_set = 1
        ranges = list(c["clients"])
        if not 0 < len(ranges) <= PK_TCP_MAX_RANGES:
            raise ValueError(f"clients: 1..{PK_TCP_MAX_RANGES} ranges")
        for i, (first, n) in enumerate(ranges):
            if v6:
                a = ipaddress.IPv6Address(first)
                if a.packed[:12] != ipaddress.IPv6Address(ranges[0][0]).packed[:12]:
                    raise ValueError("clients: IPv6 ranges share their first 12 bytes")
                _ip6_put(cfg.client6_hi, first, 12)
                cfg.client_first[i] = int(a) & 0xffffffff
            else:
                cfg.client_first[i] = _ip4_host(first)
            cfg.client_num[i] = n
        cfg.nranges = len(ranges)
        cfg.listen = c.get("listen", 80)
        cfg.listen_num = c.get("listen_num", 1)
        lo, hi = c.get("lport_range", (1024, 65535))
        cfg.lport_lo, cfg.lport_hi = lo, hi
        cfg.mss = c.get("mss", 1460)
        cfg.tos = c.get("tos", 0)
        cfg.vlan = c.get("vlan", 0)
        cfg.tcp_rst = 1 if c.get("tcp_rst", True) else 0
        cfg.rto_ns = <uint64_t>(c.get("rto", 1.0) * 1e9)
        cfg.retries = c.get("retries", 3)
        cfg.burst = c.get("burst", 32)
        cfg.duration_ns = <uint64_t>(c.get("duration", 1.0) * 1e9)
        msg = bytes(c["msg"])
        if not msg:
            raise ValueError("msg: the request or response is empty")
        self.msgs.append(msg)
        view = msg
        cfg.msg = &view[0]
        cfg.msg_len = len(msg)
        cfg.keepalive = 1 if c.get("keepalive") else 0
        cfg.cps = c.get("cps", 0.0)
        cfg.cc = c.get("cc", 0)
        cfg.ka_interval_ns = <uint64_t>(c.get("ka_interval", 0.0) * 1e9)
        cfg.ka_requests = c.get("ka_requests", 0)
        cfg.launch_num = c.get("launch_num", 4)
        cfg.slow_start_ns = <uint64_t>(c.get("slow_start", 0.0) * 1e9)
        cfg.wait_ns = <uint64_t>(c.get("wait", 0.0) * 1e9)
        cfg.fast_close = 1 if c.get("fast_close") else 0
        cfg.flood = 1 if c.get("flood") else 0
        cfg.cpu = c.get("cpu", -1)
        cfg.disable_ack = 1 if c.get("disable_ack") else 0
        cfg.raw = 1 if c.get("raw") else 0
        cfg.udp = 1 if c.get("udp") else 0
        cfg.pipeline = c.get("pipeline", 1)
        dips = list(c.get("dips") or ())
        if len(dips) > PK_TCP_MAX_DIPS:
            raise ValueError(f"dips: at most {PK_TCP_MAX_DIPS} addresses")
        if dips and v6:
            packed = b"".join(ipaddress.IPv6Address(a).packed for a in dips)
            self.msgs.append(packed)   # kept alive until create copied it
            v6view = packed
            cfg.dips6 = &v6view[0]
            cfg.ndips = len(dips)
        elif dips:
            dip_arr = _array.array("I", [_ip4_host(a) for a in dips])
            self.msgs.append(dip_arr)
            dview = dip_arr
            cfg.dips = <const uint32_t *>&dview[0]
            cfg.ndips = len(dips)
        vx = c.get("vxlan")
        if vx:   # {vni, inner_smac, inner_dmac, local, remote}: this worker's VTEPs
            cfg.vxlan = 1
            cfg.vni = vx["vni"]
            raw = bytes(int(x, 16) for x in vx["inner_smac"].split(":"))
            memcpy(cfg.inner_smac, <const char *>raw, 6)
            raw = bytes(int(x, 16) for x in vx["inner_dmac"].split(":"))
            memcpy(cfg.inner_dmac, <const char *>raw, 6)
            cfg.vtep_local = _ip4(vx["local"])
            cfg.vtep_remote = _ip4(vx["remote"])
        own = list(c.get("own") or ())
        if len(own) > PK_TCP_MAX_OWN:
            raise ValueError(f"own: at most {PK_TCP_MAX_OWN} address ranges")
        for i, (first, n) in enumerate(own):
            if v6:
                _ip6_put(cfg.own6_hi[i], first, 12)
                cfg.own_first[i] = int(ipaddress.IPv6Address(first)) & 0xffffffff
            else:
                cfg.own_first[i] = _ip4_host(first)
            cfg.own_num[i] = n
        cfg.nown = len(own)
        err[0] = 0
        e = pk_tcp_create(port._live(), &cfg, err, sizeof(err))
        if e == NULL:
            raise EngineError(err.decode(errors="replace"))
        self.es[self.n] = e
        self.n += 1
        self.roles.append("dpdk_tcp_server" if role == "server" else "dpdk_tcp_client")

    cdef void _destroy(self):
        cdef int i, n = self.n
        cdef pk_tcp_engine *e
        # closed before the GIL is let go: another thread's snapshot() then sees a closed
        # engine, never one being freed
        self.n = 0
        for i in range(n - 1, -1, -1):   # queue 0 last: it holds the port's claim
            e = self.es[i]
            self.es[i] = NULL
            with nogil:
                pk_tcp_destroy(e)

    def __dealloc__(self):
        self._destroy()

    cdef int _live(self) except -1:
        if self.n == 0:
            raise EngineError("the engine is closed")
        return self.n

    cdef bint _is_open(self):
        return self.n > 0

    cdef int _c_start(self, char *err, size_t errlen) except -2:
        cdef int i, k
        for i in range(self.n):
            err[0] = 0
            if pk_tcp_start(self.es[i], err, errlen) != 0:
                for k in range(i):
                    pk_tcp_stop(self.es[k])
                return -1
        return 0

    cdef void _c_stop(self):
        cdef int i
        for i in range(self.n):
            pk_tcp_stop(self.es[i])

    cdef object _c_running(self):
        cdef int i
        for i in range(self.n):
            if pk_tcp_running(self.es[i]):
                return True
        return False

    cdef void _c_join(self) noexcept nogil:
        cdef int i
        for i in range(self.n):
            pk_tcp_join(self.es[i])
        for i in range(self.n):   # every queue has ended: the port's NIC counters, read last
            pk_tcp_nic_last(self.es[i])

    cdef void _c_snapshot(self, int i, uint64_t *counters, uint64_t *hist):
        pk_tcp_snapshot(self.es[i], counters, hist)

    cdef object _c_error(self):
        cdef const char *msg
        cdef int i
        for i in range(self.n):
            msg = pk_tcp_error(self.es[i])
            if msg != NULL:
                text = msg.decode(errors="replace")
                if self.n == 1:
                    return text
                k, q = self.where[i]
                return f"queue {q}: {text}" if len(self.ports) == 1 else f"port {self.ports[k].dev} queue {q}: {text}"
        return None

    @property
    def port_list(self):
        return list(self.ports)

    cdef _closed(self):
        """After close(): with own_ports, close the port too."""
        if self.own_ports:
            ports, self.ports = self.ports, []
            for p in reversed(ports):
                p.close()
