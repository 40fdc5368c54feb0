"""UDP flows over DPDK: DpdkFlows (the generator) and DpdkReflect (its far end)."""
from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import ClassVar

from perfkit import sandbox
from perfkit.kinds import specfile
from perfkit.fields import SECONDS, check_declared, like, opt, whole_number
from perfkit.spec import (DPDK_JUMBO_PORTS, DPDK_MAX_BURST, DPDK_MAX_FLOWS, DPDK_MAX_IPS, DPDK_MAX_QUEUES,
                          DPDK_MAX_SIZE, DPDK_MIN_SIZE, DPDK_MODES, DPDK_REFLECT_MODES, DPDK_RING, DPDK_STD_SIZE,
                          DpdkSpec, LAB_NETS, MAC, MAX_DURATION_S, MAX_MESSAGES, MAX_RATE_PPS, check_dest_ip, check_dpdk_port, check_lab_ipv4,
                          check_netns, live_messages_per_second, parse_sizes, rate_limit, size_pattern)
from perfkit.spec import DPDK_KERNEL_DRIVERS
from perfkit.units import Rate, format_time_us, parse_duration, parse_rate, parse_size

_int_in = whole_number   # value as an int in lo..hi, else ValueError naming the field
# a flows file's six-tuple ranges (FIRST-LAST): the field and the count field the range sets
FILE_RANGES = {"ip": "src_ips", "peer_ip": "dst_ips", "sport": "sports", "dport": "dports"}


DPDK_ONLY = {"engine": ("dpdk",)}   # Meta.applies: perfkit flows/reflect --engine socket has no such option
KERNEL_PORTS = tuple(d[len("net_"):] for d in DPDK_KERNEL_DRIVERS)   # Meta.applies' port_kind: a netns means something


@dataclass(frozen=True)
class DpdkFlows(DpdkSpec):
    """UDP flows from a DPDK port: perfkit.Run(DpdkFlows(...), engine="dpdk").

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    port: str = opt(
        "ring:pk:0",
        help=("where the generator sends: ring:NAME:0 or ring:NAME:1 (the ends of an in-process "
              "pair), or a vdev: net_null0, net_ring0 (a loopback), net_memif0,role=client,..., "
              "net_af_packet0,iface=IF (with netns)"),
        unit="ring:NAME:0|1 or a vdev",
        suggestions=("ring:pk:0", "net_null0", "net_ring0", "net_memif0,role=client"),
        cli_help=("DPDK port: ring:NAME:0, net_null0,no-rx=1, net_memif0,..., net_af_packet0,iface=IF (with "
                  "--netns)"), applies=DPDK_ONLY)
    peer: str | None = opt(
        None,
        help=("a second port in this process that receives the frames (mode rxonly) or sends each one"
              " back (mode reverse); None: the far end is elsewhere"),
        unit="a second port here; empty: none", suggestions=("ring:pk:1",),
        cli_help="a second port in this process that receives (ring:NAME:1, ...)", applies=DPDK_ONLY)
    mode: str = opt(
        "rxonly",
        help=("what the far end does. rxonly: loss and one-way latency measured there; reverse: "
              "frames come back, loss and round trips measured by the generator"),
        choices=DPDK_MODES,
        cli_help="what the far end does: rxonly or reverse (default rxonly)")
    size: int | str = opt(
        64,
        help=("Ethernet frame bytes counting the 4-byte FCS, 64..1518, or jumbo up to 9018 on ring, "
              "net_ring, net_null and net_memif ports (rates count these bytes)"),
        unit="Ethernet frame bytes, FCS counted", lo=DPDK_MIN_SIZE, hi=DPDK_MAX_SIZE,
        check=False,  # a size with units (1500, 9K): parsed and checked in __post_init__
        short="-m",
        cli_help="Ethernet frame bytes with FCS, 64..1518, jumbo to 9018 (default 64)")
    rate: Rate | str | float | None = opt(
        None,
        help=("target rate (1Mpps, 500Mbps: bits of whole frames, the mean size with sizes); None = "
              "as fast as the port takes frames"),
        unit="pps or bit/s (10kpps, 100Mbps); empty: unlimited",
        short="-r",
        cli_help="target rate: 1Mpps, 500Mbps (default: unlimited)")
    flows: int = opt(
        1,
        help=("UDP flows, each its own 4-tuple and sequence numbers. Flow f is the f-th tuple of the "
              "ranges below, source port varying fastest, then destination port, source address, "
              "destination address; frames go round the flows in turn"),
        unit="flows", range_text=f"1..{DPDK_MAX_FLOWS}, at most sports x dports x src_ips x dst_ips",
        short="-f",
        cli_help="UDP flows (source ports, default 1)")
    duration: float | str = opt(
        10.0, help="how long to send", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t", cli_help="how long to send (default 10s; a --search trial: 1s)")
    ip: str = opt(
        "198.18.0.1", help="the port's own address; peer_ip: the destination (and the peer port's address)",
        unit="IPv4 address",
        cli_help="the port's address (default 198.18.0.1)", applies=DPDK_ONLY)
    peer_ip: str = opt(
        "198.18.0.2", help="the destination (and the peer port's address)", unit="IPv4 address",
        cli_help="destination address (default 198.18.0.2)", applies=DPDK_ONLY)
    dst_mac: str | None = opt(
        None,
        help=("the destination MAC; None = the peer port's, else ARP for peer_ip (1 s; then "
              "broadcast)"),
        unit="aa:bb:cc:dd:ee:ff; empty: the peer port's, or ARP",
        cli_help="destination MAC (default: the peer port's, or ARP)", advanced=True, applies=DPDK_ONLY)
    sport: int = opt(
        10000, help="UDP ports", unit="UDP port", lo=1, hi=65535,
        cli_help="first UDP source port (default 10000)", advanced=True, applies=DPDK_ONLY)
    dport: int = opt(
        9, help="UDP ports", unit="UDP port", lo=1, hi=65535,
        cli_help="UDP destination port (default 9)", advanced=True, applies=DPDK_ONLY)
    burst: int = opt(
        32, help="frames per rx/tx burst", unit="frames per burst", lo=1, hi=DPDK_MAX_BURST,
        cli_help="frames per burst (default 32)", advanced=True, applies=DPDK_ONLY)
    netns: str | None = opt(
        None, help="open the ports inside this network namespace (af_packet, tap: a lab host's)",
        unit="/run/netns/NAME",
        cli_help="open the port in this network namespace (/run/netns/NAME)", applies={"port_kind": KERNEL_PORTS})
    src_ips: int = opt(
        1, help="source addresses ip .. ip + src_ips - 1 (default 1)", unit="addresses",
        range_text=f"1..{DPDK_MAX_IPS}",
        cli_help="source addresses from --ip (default 1)", advanced=True, applies=DPDK_ONLY)
    dst_ips: int = opt(
        1,
        help=("destination addresses peer_ip .. peer_ip + dst_ips - 1 (default 1; a reverse peer "
              "reflects for all of them)"),
        unit="addresses", range_text=f"1..{DPDK_MAX_IPS}",
        cli_help="destination addresses from --peer-ip (default 1)", advanced=True, applies=DPDK_ONLY)
    sports: int | None = opt(
        None, help="source ports sport .. sport + sports - 1 (default: as many as the flows need)",
        unit="ports; empty: as the flows need", range_text="1..65536 - sport",
        cli_help="source ports from --sport (default: as many as --flows needs)", advanced=True, applies=DPDK_ONLY)
    dports: int = opt(
        1,
        help=("destination ports dport .. dport + dports - 1 (default 1; more when the flows need "
              "more source ports than there are from sport)"),
        unit="ports", range_text="1..65536 - dport",
        cli_help="destination ports from --dport (default 1)", advanced=True, applies=DPDK_ONLY)
    sizes: tuple | str | None = opt(
        None,
        help=("a size mix instead: 'imix' (64:7,570:4,1518:1), '64,570,1518', '64:7,570:4,...', sent "
              "interleaved as one preallocated pattern; size becomes the mean (rounded)"),
        unit="imix, 64,570,1518 or 64:7,570:4 (size:weight)",
        cli_help="a frame size mix instead of --size: imix, 64,570,1518 or 64:7,570:4,1518:1", advanced=True,
        applies=DPDK_ONLY)
    ramp_to: Rate | str | float | None = opt(
        None,
        help=("with rate: the rate rises linearly from rate to ramp_to over ramp_time, then stays "
              "there; paced by the TSC"),
        unit="pps or bit/s; empty: no ramp",
        cli_help="with --rate: the rate rises from --rate to this (1Mpps, 1Gbps)", advanced=True, applies=DPDK_ONLY)
    ramp_time: float | str | None = opt(
        None, help="how long the ramp from rate to ramp_to takes (default: the whole duration)", unit=SECONDS,
        cli_help="how long the ramp takes (default: --duration)", advanced=True,
        applies={**DPDK_ONLY, "ramp_to": True})
    cores: int = opt(
        1,
        help=("lcores (worker threads) per side, each with its own queue of the port(s), mempool "
              "cache and counters; the flows and the rate are split between them. Receive queues are "
              "fed by RSS where the PMD has it; a ring pair, net_ring and memif join tx queue q to rx"
              " queue q"),
        unit="lcores (worker threads) per side", range_text=f"1..{DPDK_MAX_QUEUES}, at most flows",
        cli_help="lcores per side, one port queue each (default 1)", advanced=True, applies=DPDK_ONLY)
    probe_rate: Rate | str | float | None = opt(
        None,
        help=("a low-rate latency probe stream beside the load (100pps; None = none): probe frames "
              "are flagged in the payload and get their own histogram (summary: probe_lat_p50_us "
              "...); they count in the frames and the loss"),
        cli_help="a latency probe stream beside the load: 100pps, 1kpps (default none)", advanced=True,
        applies=DPDK_ONLY)
    probe_size: int = opt(
        128, help="probe frame bytes, FCS counted (70..1518, default 128)",
        cli_help="probe frame bytes with FCS (default 128)", advanced=True, applies={**DPDK_ONLY, "probe_rate": True})
    flow_rate: float | str | None = opt(
        None,
        help=("flows added while running, per second (BiTester's flow timer): the generator starts with "
              "flows and adds flows at this rate until it sends flows_max (frame: flows_active)"),
        unit="flows per second (1k/s, 500/s); empty: a fixed flow count",
        cli_help="flows added per second while running, up to --flows-max: 1k/s", advanced=True,
        applies={**DPDK_ONLY, "flows_max": True})
    flows_max: int | str | None = opt(
        None, help="with flow_rate: the flow count it grows to (the ranges cover these flows)",
        unit="flows (100k)", range_text=f"flows..{DPDK_MAX_FLOWS}",
        cli_help="with --flow-rate: the flow count to grow to: 100k", advanced=True,
        applies={**DPDK_ONLY, "flow_rate": True})
    bidirectional: bool = opt(
        False,
        help=("with a peer port (mode rxonly): both ports send and receive, each the same flows and "
              "rate; loss and one-way latency counted at both ends"),
        cli_help="with --peer: both ports send and receive", advanced=True,
        applies={**DPDK_ONLY, "mode": ("rxonly",), "peer": True})
    rx_port: str | None = opt(
        None,
        help=("mode reverse with the far end elsewhere: the frames come back on this second port of "
              "this side (BiTester's -r: receive on one port, send on another); loss and round trips "
              "are counted there"),
        unit="a second port here; empty: the frames come back on port", suggestions=("ring:pk2:1",),
        cli_help="reverse: the frames come back on this second port (BiTester's -r)", advanced=True,
        applies={**DPDK_ONLY, "mode": ("reverse",)})
    messages: int | str | None = opt(
        None,
        help=("a counted burst: the generators stop once this many load frames went out (split over the "
              "cores; RFC 2544's back-to-back sends it unpaced, as fast as the port takes it); duration still "
              "bounds it. None = until the duration ends"),
        unit="frames (10k); empty: until the duration ends", short="-n",
        cli_help="stop once this many frames went out (a counted burst): 10k", advanced=True, applies=DPDK_ONLY)

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # mode, sport, dport, burst
        put("netns", check_netns(self.netns))
        put("port", check_dpdk_port(self.port, "port", self.netns))
        if self.peer is not None:
            put("peer", check_dpdk_port(self.peer, "peer", self.netns))
            if self.peer == self.port:
                raise ValueError(f"peer: {self.peer!r} is the port itself; leave peer out for one port")
            bare = lambda p: p.startswith("net_ring") and "," not in p  # noqa: E731
            if bare(self.port) and bare(self.peer):
                raise ValueError(f"peer: {self.port} and {self.peer} would be two separate loopback "
                                 "ports (a net_ring vdev receives what it sends); join two ports with "
                                 "ring:NAME:0 and ring:NAME:1")
        self._check_rx_port(put)
        size = parse_size(self.size, "size")
        if not DPDK_MIN_SIZE <= size <= DPDK_MAX_SIZE:
            raise ValueError(f"size: {size} bytes is out of range {DPDK_MIN_SIZE}..{DPDK_MAX_SIZE} "
                             "(Ethernet frames, FCS counted)")
        put("size", size)
        if self.sizes is not None:
            put("sizes", parse_sizes(self.sizes))
            put("size", round(self.mean_size))
        if self.rate is not None:
            put("rate", rate_limit(self.rate, size, "frames"))
        put("flows", _int_in(self.flows, "flows", 1, DPDK_MAX_FLOWS))
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        self._check_ramp(put)
        put("cores", _int_in(self.cores, "cores", 1, DPDK_MAX_QUEUES))
        if self.probe_rate is not None:
            pr = parse_rate(self.probe_rate, "probe_rate")
            if pr.unit != "pps" or not 0 < pr.value <= 1e6:
                raise ValueError(f"probe_rate: {self.probe_rate!r}: probes per second above 0, "
                                 "at most 1Mpps (100pps, 1kpps)")
            put("probe_rate", pr)
        put("probe_size", _int_in(self.probe_size, "probe_size", 70, DPDK_MAX_SIZE))
        biggest = max([self.size] + [s for s, _ in self.sizes or ()]
                      + ([self.probe_size] if self.probe_rate else []))
        if biggest > DPDK_STD_SIZE:
            for name in ("port", "peer", "rx_port"):
                dev = getattr(self, name)
                field = "sizes" if self.sizes else "size"
                if dev is not None and not dev.startswith(DPDK_JUMBO_PORTS):
                    raise ValueError(f"{field}: {biggest}-byte frames are jumbo: {name} {dev.split(',')[0]} "
                                     f"takes at most {DPDK_STD_SIZE} (jumbo on ring, net_ring, net_null, "
                                     "net_memif ports)")
                # memif 22.11 corrupts frames chained over many of its 2 KB buffers when its
                # ring runs full (seen: duplicates, non-IP frames): one buffer per frame
                bsize = [int(a[6:]) for a in (dev or "").split(",")[1:] if a.startswith("bsize=")
                         and a[6:].isdigit()]
                if dev is not None and dev.startswith("net_memif") and not (bsize and bsize[0] >= biggest - 4):
                    raise ValueError(f"{field}: {biggest}-byte frames over memif need buffers that hold one: "
                                     f"add bsize={max(9216, biggest)} to {name} (and to the other memif side)")
        if self.bidirectional not in (True, False):
            raise ValueError(f"bidirectional: {self.bidirectional!r} is not true or false")
        if self.bidirectional and (self.peer is None or self.mode != "rxonly"):
            raise ValueError("bidirectional: needs a peer port in this process and mode rxonly "
                             "(the peer sends the same flows back at the same rate)")
        if self.flows < self.cores:
            raise ValueError(f"flows: {self.flows} flow(s) for {self.cores} cores: each core sends "
                             "flows of its own (give at least as many flows)")
        self._check_growth(put)
        if self.messages is not None:   # at least a frame per core
            put("messages", _int_in(_count(self.messages, "messages"), "messages", self.cores, MAX_MESSAGES))
        put("ip", check_lab_ipv4(self.ip, "ip"))
        put("peer_ip", check_dest_ip(self.peer_ip, "peer_ip", 4))
        if self.ip == self.peer_ip:
            raise ValueError(f"peer_ip: {self.peer_ip} is the port's own address")
        if self.dst_mac is not None:
            if not MAC.fullmatch(str(self.dst_mac)):
                raise ValueError(f"dst_mac: {self.dst_mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            put("dst_mac", str(self.dst_mac).lower())
        self._check_ranges(put)

    def _check_rx_port(self, put):
        """rx_port (BiTester's -r): a second port of this side, in mode reverse with the far end elsewhere."""
        if self.rx_port is None:
            return
        put("rx_port", check_dpdk_port(self.rx_port, "rx_port", self.netns))
        if self.mode != "reverse" or self.peer is not None:
            raise ValueError("rx_port: only in mode reverse with the far end elsewhere (no peer): the "
                             "frames it sends back come in on rx_port")
        if self.rx_port.split(",")[0] == self.port.split(",")[0]:
            raise ValueError(f"rx_port: {self.rx_port!r} is the port itself; leave rx_port out to "
                             "receive on port")

    def _check_growth(self, put):
        """flow_rate and flows_max: flows added while running, both or neither."""
        if (self.flow_rate is None) != (self.flows_max is None):
            given, other = ("flow_rate", "flows_max") if self.flows_max is None else ("flows_max", "flow_rate")
            raise ValueError(f"{given}: give {other} as well (flows grow from flows at flow_rate up to flows_max)")
        if self.flow_rate is None:
            return
        put("flows_max", _count(self.flows_max, "flows_max"))
        if not self.flows < self.flows_max <= DPDK_MAX_FLOWS:
            raise ValueError(f"flows_max: {self.flows_max} is out of range {self.flows + 1}..{DPDK_MAX_FLOWS} "
                             f"(above flows, {self.flows})")
        rate = _per_second(self.flow_rate, "flow_rate")
        if not 0 < rate <= 1e9:
            raise ValueError(f"flow_rate: {self.flow_rate!r} is out of range (above 0, at most 1G/s)")
        put("flow_rate", rate)

    @classmethod
    def from_file(cls, path, **overrides) -> "DpdkFlows":
        """DpdkFlows from a TOML flows file (BiTester's -f): its keys are this spec's fields, the
        six-tuple's ranges as FIRST-LAST (ip, peer_ip, sport, dport; proto = "udp"), sizes, rates,
        cores (concurrency); the spec's own checks, each error naming FILE:LINE. overrides win."""
        return specfile.load(path, cls, ranges=FILE_RANGES, fixed={"proto": ("udp",)}, overrides=overrides)

    @property
    def flows_total(self) -> int:
        """The flows a run sends by its end: flows_max when the flows grow, else flows."""
        return self.flows_max or self.flows

    def _check_ramp(self, put):
        if self.ramp_to is None:
            if self.ramp_time is not None:
                raise ValueError("ramp_time: give ramp_to (the rate to rise to) as well")
            return
        if self.rate is None:
            raise ValueError("ramp_to: a ramp starts from rate: give rate as well")
        to = parse_rate(self.ramp_to, "ramp_to")
        if not to.value > 0 or to.messages_per_second(self.mean_size) > MAX_RATE_PPS:
            raise ValueError(f"ramp_to: {self.ramp_to!r} is out of range (above 0, at most "
                             f"{MAX_RATE_PPS:.0e} frames/s)")
        put("ramp_to", to)
        t = self.duration if self.ramp_time is None else parse_duration(self.ramp_time, "ramp_time")
        if not 0 < t <= self.duration:
            raise ValueError(f"ramp_time: {self.ramp_time!r} is out of range (above 0, at most the duration)")
        put("ramp_time", t)

    @property
    def mean_size(self) -> float:
        """Mean frame bytes (FCS counted): size, or the sizes' weighted mean."""
        if self.sizes is None:
            return float(self.size)
        return sum(s * w for s, w in self.sizes) / sum(w for _, w in self.sizes)

    @property
    def ramp_end_per_second(self) -> float:
        return self.ramp_to.messages_per_second(self.mean_size) if self.ramp_to else 0.0

    def _check_ranges(self, put):
        """The address and port ranges the flows are spread over."""
        put("src_ips", _int_in(self.src_ips, "src_ips", 1, DPDK_MAX_IPS))
        put("dst_ips", _int_in(self.dst_ips, "dst_ips", 1, DPDK_MAX_IPS))
        put("dports", _int_in(self.dports, "dports", 1, 65535))
        if self.dport + self.dports > 65536:
            raise ValueError(f"dports: {self.dports} ports from {self.dport} pass 65535")
        flows, name = (self.flows_max, "flows_max") if self.flows_max else (self.flows, "flows")
        others = self.src_ips * self.dst_ips * self.dports
        if self.sports is None:
            need = -(-flows // others)
            if self.sport + need > 65536 and self.dports == 1:
                # more flows than source ports from sport: they go over destination ports too
                put("dports", -(-need // (65536 - self.sport)))
                if self.dport + self.dports > 65536:
                    raise ValueError(f"{name}: {flows} flows need more source and destination ports "
                                     "than there are: give src_ips or dst_ips")
                others = self.src_ips * self.dst_ips * self.dports
                need = -(-flows // others)
            if self.sport + need > 65536:
                raise ValueError(f"{name}: {flows} flows need {need} source ports from {self.sport}, "
                                 "past 65535: lower sport, or give more src_ips, dst_ips or dports")
            put("sports", need)
        else:
            put("sports", _int_in(self.sports, "sports", 1, 65535))
            if self.sport + self.sports > 65536:
                raise ValueError(f"sports: {self.sports} ports from {self.sport} pass 65535")
            if self.sports * others < flows:
                raise ValueError(f"{name}: {flows} flows need as many tuples; sports x dports x "
                                 f"src_ips x dst_ips is only {self.sports * others}")
        lab = LAB_NETS[0]
        src0, dst0 = ipaddress.IPv4Address(self.ip), ipaddress.IPv4Address(self.peer_ip)
        if int(src0) + self.src_ips - 1 > int(lab.broadcast_address):
            raise ValueError(f"src_ips: {self.src_ips} addresses from {src0} leave 198.18.0.0/15")
        if int(dst0) + self.dst_ips - 1 > 0xFFFFFFFF:
            raise ValueError(f"dst_ips: {self.dst_ips} addresses from {dst0} pass 255.255.255.255")
        # the guard's blocks lie far more than DPDK_MAX_IPS apart: a range with both ends in them is in one
        sandbox.check(dst0 + self.dst_ips - 1, "dst_ips")
        if int(src0) < int(dst0) + self.dst_ips and int(dst0) < int(src0) + self.src_ips:
            raise ValueError(f"dst_ips: the source addresses {src0} + {self.src_ips} and the destination "
                             f"addresses {dst0} + {self.dst_ips} overlap")

    @property
    def test(self) -> str:
        """How perfkit's summaries read it: udp_bw (one way) or udp_lat (round trips)."""
        return "udp_bw" if self.mode == "rxonly" else "udp_lat"

    @property
    def messages_per_second(self) -> float:
        return self.rate.messages_per_second(self.mean_size) if self.rate else 0.0


@dataclass(frozen=True)
class DpdkReflect(DpdkSpec):
    """The far end of DPDK flows on one port: perfkit.Run(DpdkReflect(...), engine="dpdk");
    mode forward carries frames between two ports (testpmd's io forward)."""
    port: str = opt(
        "ring:pk:1", help="the port to answer on: ring:NAME:1 (the far end of a pair) or a vdev",
        unit="ring:NAME:0|1 or a vdev", suggestions=("ring:pk:1", "net_null0", "net_memif0,role=server"),
        cli_help="DPDK port (see perfkit flows)", applies=DPDK_ONLY)
    mode: str = opt(
        "reverse",
        help=("rxonly: count, parse, loss/duplicates/reordering and one-way latency per flow (the "
              "sender's clock: meaningful on this host); reverse: send UDP frames for this port's "
              "address back with MACs, IPs and ports swapped; forward: every frame received on port "
              "leaves by peer and every frame received on peer leaves by port, payload untouched "
              "(testpmd's io forward; its mac forward with dst_mac)"),
        choices=DPDK_REFLECT_MODES,
        cli_help="rxonly, reverse or forward (default reverse)")
    duration: float | str = opt(
        10.0, help="how long to run (or until stopped)", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t",
        cli_help="how long to run (default 10s; Ctrl-C stops)")
    ip: str = opt(
        "198.18.0.2",
        help=("the port's address: ARP and ICMP echo are answered for it (not in forward mode: a "
              "forwarder has no address, it carries ARP and ping like a wire)"),
        unit="IPv4 address",
        cli_help="the port's address (default 198.18.0.2; socket engine: 127.0.0.1)")
    flows: int = opt(
        1024, help="rxonly: flow ids tracked (0 .. flows - 1)", unit="flows", lo=1, hi=DPDK_MAX_FLOWS,
        short="-f",
        cli_help="rxonly: flow ids tracked (default 1024)", applies={"mode": ("rxonly",)})
    burst: int = like(DpdkFlows, "burst", advanced=True)
    netns: str | None = like(DpdkFlows, "netns")
    ips: int = opt(
        1, help="reverse: reflect UDP for ip .. ip + ips - 1 (a generator's dst_ips)",
        cli_help="reverse: reflect for this many addresses from --ip (default 1)", advanced=True,
        applies={**DPDK_ONLY, "mode": ("reverse",)})
    cores: int = opt(
        1,
        help=("lcores, one queue of the port each (the generator's side needs as many). forward: 1 = "
              "one lcore for both directions; 2N = one lcore per direction and queue, N queues on "
              "each port"),
        unit="lcores (worker threads) per side", advanced=True, applies=DPDK_ONLY)
    peer: str | None = opt(
        None, help="forward: the second port",
        cli_help="forward: the second port (frames go from --port to --peer and back)",
        applies={**DPDK_ONLY, "mode": ("forward",)})
    dst_mac: str | None = opt(
        None,
        help=("forward: frames leaving port get this destination MAC and port's own MAC as source "
              "(the next hop's; None = untouched); reverse with tx_port: the same for the frames leaving "
              "tx_port (None: back to the sender's MAC)"),
        unit="aa:bb:cc:dd:ee:ff; empty: the peer port's, or ARP",
        cli_help=("forward: the next hop's MAC for frames leaving --port (default: frames untouched); "
                  "reverse: for frames leaving --tx-port"), advanced=True,
        applies={**DPDK_ONLY, "mode": ("forward", "reverse")})
    tx_port: str | None = opt(
        None,
        help=("reverse: the reflected frames leave by this second port (BiTester's -t: receive on one "
              "port, send on another), with its MAC as source and dst_mac (when given) as destination"),
        unit="a second port here; empty: back out of port", suggestions=("ring:pk2:0",),
        cli_help="reverse: send the reflected frames out of this second port (BiTester's -t)", advanced=True,
        applies={**DPDK_ONLY, "mode": ("reverse",)})
    peer_dst_mac: str | None = opt(
        None, help="forward: the same for frames leaving peer",
        cli_help="forward: the next hop's MAC for frames leaving --peer", advanced=True,
        applies={**DPDK_ONLY, "mode": ("forward",)})

    MODES: ClassVar[tuple] = DPDK_REFLECT_MODES

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # mode, flows, burst
        put("netns", check_netns(self.netns))
        put("port", check_dpdk_port(self.port, "port", self.netns))
        self._check_forward(put)
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        put("ip", check_lab_ipv4(self.ip, "ip"))
        put("ips", _int_in(self.ips, "ips", 1, DPDK_MAX_IPS))
        put("cores", _int_in(self.cores, "cores", 1, DPDK_MAX_QUEUES))
        if int(ipaddress.IPv4Address(self.ip)) + self.ips - 1 > int(LAB_NETS[0].broadcast_address):
            raise ValueError(f"ips: {self.ips} addresses from {self.ip} leave 198.18.0.0/15")
        if self.mode == "forward" and self.cores != 1 and self.cores % 2:
            raise ValueError(f"cores: {self.cores}: forward takes 1 (one lcore for both directions) or an "
                             f"even number (one lcore per direction and queue), at most {DPDK_MAX_QUEUES}")

    def _check_forward(self, put):
        if self.tx_port is not None:
            if self.mode != "reverse":
                raise ValueError(f"tx_port: only mode reverse sends by a second port (not {self.mode})")
            put("tx_port", check_dpdk_port(self.tx_port, "tx_port", self.netns))
            if self.tx_port.split(",")[0] == self.port.split(",")[0]:
                raise ValueError(f"tx_port: {self.tx_port!r} is the port itself; leave tx_port out to send "
                                 "back out of port")
        if self.mode != "forward":
            for name in ("peer", "dst_mac", "peer_dst_mac"):
                if name == "dst_mac" and self.tx_port is not None:
                    continue   # reverse by a tx port: the next hop's MAC
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: only mode forward uses it (a second port and next hops)"
                                     + (" or reverse with tx_port" if name == "dst_mac" else ""))
            if self.dst_mac is not None:
                if not MAC.fullmatch(str(self.dst_mac)):
                    raise ValueError(f"dst_mac: {self.dst_mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
                put("dst_mac", str(self.dst_mac).lower())
            return
        if self.peer is None:
            raise ValueError("peer: mode forward needs a second port (frames go from port to peer "
                             "and from peer to port)")
        put("peer", check_dpdk_port(self.peer, "peer", self.netns))
        if self.peer.split(",")[0] == self.port.split(",")[0]:
            raise ValueError(f"peer: {self.peer!r} is the port itself: forward between two ports")
        ends = [DPDK_RING.fullmatch(p) and p.rsplit(":", 1)[0] for p in (self.port, self.peer)]
        if ends[0] and ends[0] == ends[1]:
            raise ValueError(f"peer: {self.port} and {self.peer} are the two ends of one ring pair: what "
                             "one forwards the other receives and forwards back, for ever")
        for name in ("port", "peer"):
            dev = getattr(self, name)
            if dev.startswith("net_ring") and "," not in dev:
                raise ValueError(f"{name}: {dev} is a loopback port (a net_ring vdev receives what it "
                                 "sends): forwarding through it loops every frame; use ring:NAME:0|1")
        for name in ("dst_mac", "peer_dst_mac"):
            mac = getattr(self, name)
            if mac is not None:
                if not MAC.fullmatch(str(mac)):
                    raise ValueError(f"{name}: {mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
                put(name, str(mac).lower())

    @property
    def test(self) -> str:
        return f"dpdk_{self.mode}"


# ------------------------------------------------------------------ the kind
SPECS = (DpdkFlows, DpdkReflect)
ENGINE = {DpdkFlows: "dpdk", DpdkReflect: "dpdk"}   # when perfkit.Run is given none
# the counter groups (perfkit.stats.GROUPS) DPDK flows and reflectors write: no TCP state, sockets or HTTP
COUNTER_GROUPS = ("traffic", "seq", "latency", "probe", "nic", "cpu")


def counter_groups(spec) -> tuple[str, ...]:
    """COUNTER_GROUPS; a generator's runs also the live control's gauges (rate_target, flows_active)."""
    return COUNTER_GROUPS + (("control",) if isinstance(spec, DpdkFlows) else ())


def live_rate(spec, value) -> float:
    """run.set_rate(value) of a DpdkFlows run: the frames/s each generator paces to (the spec's
    rate split over its cores), value checked as the spec's rate is; None: as fast as the port goes."""
    return live_messages_per_second(value, spec.mean_size, "frames") / spec.cores


def summary_extra(spec, handle, roles) -> dict:
    """Growing flows: flows_seen, the distinct load flows the receiving port's table saw (its
    first receiver's, after join; the larger of the two tables in a bidirectional run)."""
    seen_of = getattr(handle, "flows_seen", None)
    if not isinstance(spec, DpdkFlows) or not spec.flows_max or seen_of is None:
        return {}
    seen = [n for i in range(len(roles)) if (n := seen_of(i)) is not None]
    return {"flows_seen": max(seen)} if seen else {}


def both_ways(spec) -> bool:
    """DPDK flows whose frames go both ways: bidirectional, or reverse (frames come back)."""
    return isinstance(spec, DpdkFlows) and (spec.bidirectional or spec.mode == "reverse")


def directions(spec, roles) -> tuple[list, bool] | None:
    """Both directions apart (perfkit.stats.direction_summary): a bidirectional or reverse DpdkFlows
    run's workers by side, "a" on the generator's port, "b" on the peer's (a reverse run with its
    reflector elsewhere has side a only); round_trip in reverse mode. None for other runs, and for a
    run whose workers are not its plan's (a cluster's)."""
    if not both_ways(spec):
        return None
    _, workers = ports_and_workers(spec)
    if len(workers) != len(roles):
        return None
    # port 1 is the peer's (side b), or this side's own rx_port (side a)
    return ["b" if w["port"] == 1 and spec.rx_port is None else "a" for w in workers], spec.mode == "reverse"


LIVE_RATE = {DpdkFlows: live_rate}   # perfkit.run.Run.set_rate: the specs whose rate changes while running


def plan(spec) -> dict:
    """The DPDK engine's plan (perfkit.engines.dpdk): its ports and workers, the queues
    each port opens with, the network namespace they open in, and whether a generator
    waits for its memif links."""
    ports, workers = ports_and_workers(spec)
    queues = getattr(spec, "cores", 1)
    if getattr(spec, "mode", None) == "forward":
        queues = max(1, queues // 2)
    return {"engine": "dpdk", "spec": type(spec).__name__, "ports": ports, "workers": workers,
            "queues": queues, "netns": spec.netns, "wait_memif": isinstance(spec, DpdkFlows)}


def ports_and_workers(spec) -> tuple[list[tuple[str, str]], list[dict]]:
    """The ports ((dev, ip)) and workers a spec runs on: receiving workers first.
    With cores N, every port has N queues and each side N workers, one per queue;
    generator k sends flows k*F/N .. (k+1)*F/N - 1 at rate/N."""
    n = getattr(spec, "cores", 1)
    if isinstance(spec, DpdkFlows):
        gens = []
        for k in range(n):
            first, count = _split(spec.flows_total, n, k)
            grow = {"flows_start": min(count, _split(spec.flows, n, k)[1]), "flow_rate": spec.flow_rate / n
                    } if spec.flows_max else {}
            gens.append({**grow,
                "role": "dpdk_send", "port": 0, "queue": k, "peer": -1, "track": spec.mode == "reverse",
                "size": spec.size, "flows": count, "flow_first": first, "burst": spec.burst,
                "rate": spec.messages_per_second / n, "duration": spec.duration,
                "dst_mac": spec.dst_mac, "dst_ip": spec.peer_ip, "sport": spec.sport, "dport": spec.dport,
                "src_ips": spec.src_ips, "dst_ips": spec.dst_ips, "sports": spec.sports, "dports": spec.dports,
                "sizes": size_pattern(spec.sizes) if spec.sizes else None,
                "rate_end": spec.ramp_end_per_second / n, "ramp": spec.ramp_time or 0.0,
                "probe_rate": spec.probe_rate.value / n if spec.probe_rate else 0.0,
                "probe_size": spec.probe_size, "count": _split(spec.messages, n, k)[1] if spec.messages else 0})
        if spec.rx_port is not None:
            # the far end is elsewhere and sends back into rx_port: a receiver per queue there counts
            # loss and round trips (its one-way latency from this host's timestamps); the generators
            # ARP for their destination as without a peer (peer_back)
            back = [{"role": "dpdk_recv", "port": 1, "queue": k, "flows": spec.flows_total, "burst": spec.burst,
                     "duration": spec.duration} for k in range(n)]
            return [(spec.port, spec.ip), (spec.rx_port, spec.ip)], back + [
                {**g, "track": False, "peer": k, "peer_back": 1} for k, g in enumerate(gens)]
        if spec.peer is None:
            if spec.dst_mac is None and spec.port.startswith("net_null"):
                for g in gens:
                    g["dst_mac"] = "ff:ff:ff:ff:ff:ff"  # nobody there to answer ARP
            return [(spec.port, spec.ip)], gens
        if spec.bidirectional:
            # both ports generate (and receive: track 2); the peer's generators send from
            # peer_ip to ip, their own address ranges swapped
            back = [{**g, "port": 1, "track": 2, "dst_ip": spec.ip, "dst_ips": spec.src_ips,
                     "src_ips": spec.dst_ips, "peer": n + k} for k, g in enumerate(gens)]
            return [(spec.port, spec.ip), (spec.peer, spec.peer_ip)], back + [
                {**g, "track": 2, "peer": k} for k, g in enumerate(gens)]
        far = [{"role": "dpdk_recv" if spec.mode == "rxonly" else "dpdk_reflect", "port": 1, "queue": k,
                "flows": spec.flows_total, "burst": spec.burst, "duration": spec.duration,
                "dst_ips": spec.dst_ips} for k in range(n)]
        return [(spec.port, spec.ip), (spec.peer, spec.peer_ip)], far + [{**g, "peer": k}
                                                                          for k, g in enumerate(gens)]
    if isinstance(spec, DpdkReflect) and spec.mode == "forward":
        # no addresses: a forwarder is a wire. cores 1: one thread polls both ports (worker 0
        # runs worker 1); 2N: one thread per direction and queue, N queues per port
        queues = max(1, spec.cores // 2)
        ways = ((0, 1, spec.peer_dst_mac), (1, 0, spec.dst_mac))   # (rx port, out port, next hop)
        workers = [{"role": "dpdk_forward", "port": rx, "out": out, "queue": q, "burst": spec.burst,
                    "duration": spec.duration, "dst_mac": mac, "with_worker": 1 if spec.cores == 1 and rx == 0 else -1}
                   for rx, out, mac in ways for q in range(queues)]
        return [(spec.port, None), (spec.peer, None)], workers
    if isinstance(spec, DpdkReflect):
        out = {"out": 1, "dst_mac": spec.dst_mac} if spec.tx_port is not None else {}   # BiTester's -t
        ports = [(spec.port, spec.ip)] + ([(spec.tx_port, spec.ip)] if spec.tx_port is not None else [])
        return ports, [{"role": "dpdk_recv" if spec.mode == "rxonly" else "dpdk_reflect",
                        "port": 0, "queue": k, "flows": spec.flows, "burst": spec.burst,
                        "duration": spec.duration, "dst_ips": spec.ips, **out} for k in range(n)]
    raise ValueError(f"engine: dpdk runs DpdkFlows and DpdkReflect specs, not {type(spec).__name__}")


_SI_COUNT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
_COUNT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?)\s*")


def _count(value, field: str) -> int:
    """A whole count from 100000, '100k' or '1.5M' (SI: k = 1000)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _COUNT.fullmatch(str(value))
    n = float(m.group(1)) * _SI_COUNT[m.group(2).lower()] if m else None
    if n is None or n != int(n):
        raise ValueError(f"{field}: {value!r} is not a whole count (100000, 100k)")
    return int(n)


def _per_second(value, field: str) -> float:
    """A number per second from 1000, '1k/s', '1k' or '500/s'."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{field}: {value!r} is not a finite number")
        return float(value)
    text = str(value).strip()
    m = _COUNT.fullmatch(text[:-2] if text.endswith("/s") else text)
    if not m:
        raise ValueError(f"{field}: cannot read {value!r} as a number per second (1k/s, 500/s)")
    return float(m.group(1)) * _SI_COUNT[m.group(2).lower()]


def _split(total: int, parts: int, k: int) -> tuple[int, int]:
    """(first, count) of part k when total is cut into parts near-equal pieces."""
    first = total * k // parts
    return first, total * (k + 1) // parts - first
# the dashboard's title (perfkit.ui.charts.spec_title): DpdkReflect's parts before the duration;
# DpdkFlows' first part, then its size, rate and flows
TITLE = {DpdkReflect: lambda spec: (f"dpdk {spec.mode} on {spec.port}",)}
TITLE_HEAD = {DpdkFlows: lambda spec: f"dpdk {spec.mode} {spec.port}" + (f" → {spec.peer}" if spec.peer else "")}
LAYOUT = {DpdkFlows: "dpdk_flows", DpdkReflect: "dpdk"}   # perfkit.ui.charts.LAYOUTS: the dashboard's charts (flows: with the target rate)
# a spec's own layout: flows reporting both directions apart (directions) chart each way as well
LAYOUT_PICK = {DpdkFlows: lambda spec: "dpdk_flows_ways" if both_ways(spec) else "dpdk_flows"}
TASKS = {DpdkFlows: ("run", "search"), DpdkReflect: ("run",)}   # the panel's tasks: a rate search beside a run


# ------------------------------------------------------------------ its commands: perfkit flows, perfkit reflect
import dataclasses  # noqa: E402 (the command-line part of the kind, kept at its end)

from perfkit.fields import add_option, applies, cluster_option, spec_fields  # noqa: E402
from perfkit.kinds.qperf import LocalTest, search_options, the_lab  # noqa: E402
from perfkit.kinds.reflect import SocketReflect  # noqa: E402


def _flows_parser(sub) -> None:
    flw = sub.add_parser("flows", help="UDP flows from a DPDK port (generator; a peer port receives or reflects)")
    flw.add_argument("--engine", default="dpdk", help="dpdk (default), or socket: UDP flows between kernel "
                     "sockets on loopback (or --lab), both ends in this process (--size, --rate, --flows, "
                     "--duration, --mode)")
    applies(flw.add_argument("--lab", help="socket engine: send from this lab's h1 to its h2"), engine=("socket",))
    applies(flw.add_argument("--flows-file", metavar="F.toml",
                             help="the flows from a TOML file (BiTester's -f): keys are the options' fields "
                                  "(port, peer, rate, sizes, cores, ip = 'A-B', sport = 'A-B', ...); options "
                                  "given here win"), **DPDK_ONLY)
    add_option(flw, DpdkFlows, "port", default=None)   # no default port: perfkit flows asks for one
    for name in ("peer", "mode", "size", "rate", "flows"):
        add_option(flw, DpdkFlows, name)
    add_option(flw, DpdkFlows, "duration", default=None)   # None: 10s, or a --search trial's 1s
    for name in ("ip", "peer_ip", "dst_mac", "sport", "dport", "burst", "src_ips", "dst_ips", "sports", "dports",
                 "sizes", "ramp_to", "ramp_time", "probe_rate", "probe_size", "bidirectional", "flow_rate",
                 "flows_max", "messages", "rx_port"):
        add_option(flw, DpdkFlows, name)
    _dpdk_options(flw)
    search_options(flw)
    cluster_option(flw)   # the dpdk engine: each engine's port on its own lab host (perfkit.kinds.split)


def _reflect_parser(sub) -> None:
    rfl = sub.add_parser("reflect", help="the far end of DPDK flows on one port (rxonly or reverse), or a "
                         "forwarder between two ports (forward)")
    rfl.add_argument("--engine", default="dpdk", help="dpdk (default), or socket: a kernel UDP socket on "
                     "--ip:--udp-port (rxonly or reverse; --netns for a lab host)")
    add_option(rfl, DpdkReflect, "port", default=None)   # no default port: perfkit reflect asks for one
    add_option(rfl, SocketReflect, "port")                # --udp-port
    for name in ("mode", "peer", "tx_port", "dst_mac", "peer_dst_mac", "duration"):
        add_option(rfl, DpdkReflect, name)
    add_option(rfl, DpdkReflect, "ip", default=None)      # the engine's own: DPDK's or the socket's
    for name in ("flows", "burst", "ips"):
        add_option(rfl, DpdkReflect, name)
    _dpdk_options(rfl)


def _dpdk_options(sp) -> None:
    """What perfkit flows and reflect share: cores and namespace, EAL's options, the output."""
    add_option(sp, DpdkFlows, "cores")
    add_option(sp, DpdkFlows, "netns")
    eal = [sp.add_argument("--mem", default=512, help="EAL memory in MB (default 512)"),
           sp.add_argument("--hugepages", default="auto",
                           help="auto, on or off (default auto: on where enough are free)"),
           sp.add_argument("--cpus", help="pin the datapath workers to these CPUs: 1 or 0,1 (default: not pinned)"),
           sp.add_argument("--log-level", default="error", help="DPDK log level on stderr (default error)"),
           sp.add_argument("-v", "--verbose", action="store_true",
                           help="say each port's setup as it opens (driver, queues, RSS, offloads, MTU, descriptors)"),
           sp.add_argument("--pmd-dir", help="also load the PMD plugins in this directory (EAL's -d)")]
    for action in eal:   # DPDK's EAL: nothing to the socket engine
        applies(action, **DPDK_ONLY)
    sp.add_argument("--interval", default="1s", help="row interval (default 1s)")
    sp.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    sp.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet")


# DpdkFlows options the socket engine has no counterpart for (their defaults: the fields'): those their
# Meta.applies keeps to the dpdk engine, and netns (kept to the port kinds that reach a kernel)
_DPDK_ONLY_FLOWS = (*(f.name for f, m in spec_fields(DpdkFlows) if m and m.applies and dict(m.applies).get("engine")
                      == DPDK_ONLY["engine"]), "netns")
_ETH_IP_UDP_FCS = 14 + 20 + 8 + 4   # a frame's bytes around its UDP payload


def socket_flows_from_args(a) -> LocalTest:
    """perfkit flows --engine socket: the same flows on kernel sockets, both ends here (a LocalTest)."""
    defaults = {**{f.name: f.default for f in dataclasses.fields(DpdkFlows)}, "port": None}   # --port has none
    given = [k for k in _DPDK_ONLY_FLOWS if getattr(a, k, defaults[k]) not in (defaults[k], str(defaults[k]))]
    if given:
        raise ValueError(f"{given[0].replace('_', '-')}: the socket engine has no such option (dpdk engine only); "
                         "it sends --flows UDP flows of --size at --rate for --duration, --mode rxonly or reverse")
    if a.mode not in DPDK_MODES:
        raise ValueError(f"mode: {a.mode!r} is not one of {', '.join(DPDK_MODES)}")
    frame = parse_size(a.size, "size")
    if frame <= _ETH_IP_UDP_FCS:
        raise ValueError(f"size: a {frame} B frame has no UDP payload (frames are above {_ETH_IP_UDP_FCS} B)")
    spec = LocalTest(test="udp_bw" if a.mode == "rxonly" else "udp_lat", size=frame - _ETH_IP_UDP_FCS,
                     rate=a.rate, flows=a.flows if a.mode == "rxonly" else 1, duration=a.duration or "10s",
                     lab=the_lab(a.lab))
    if a.mode == "reverse" and str(a.flows) != "1":
        raise ValueError("flows: reverse mode on the socket engine is one ping-pong flow (udp_lat)")
    return spec


def socket_flows_header(spec, a) -> str:
    frame = spec.size + _ETH_IP_UDP_FCS
    return (f"perfkit flows: {frame} B frames ({spec.size} B UDP payload), {spec.rate or 'unlimited'}, "
            f"{spec.flows} flow(s), {spec.duration:g} s, {a.mode}, on "
            f"{'lab ' + spec.lab + ' (h1 -> h2)' if spec.lab else spec.host} (socket engine)")


def flows_from_args(a):
    """perfkit flows' spec from its parsed arguments: a LocalTest on the socket engine, else a DpdkFlows."""
    return socket_flows_from_args(a) if a.engine == "socket" else dpdk_flows_from_args(a)


def dpdk_flows_from_args(a) -> DpdkFlows:
    """perfkit flows' spec on the dpdk engine from its parsed arguments."""
    if a.lab:
        raise ValueError("lab: the dpdk engine takes a lab host's namespace as --netns, with an af_packet port")
    if getattr(a, "flows_file", None):
        return DpdkFlows.from_file(a.flows_file, **_given_fields(a))
    if not a.port:
        raise ValueError("port: give the DPDK port (--port ring:NAME:0, net_null0, net_memif0,..., "
                         "net_af_packet0,iface=IF)")
    return DpdkFlows(port=a.port, peer=a.peer, mode=a.mode, size=a.size, rate=a.rate, flows=a.flows,
                     duration=a.duration or "10s", ip=a.ip, peer_ip=a.peer_ip, dst_mac=a.dst_mac, sport=a.sport,
                     dport=a.dport, burst=a.burst, netns=a.netns, src_ips=a.src_ips, dst_ips=a.dst_ips,
                     sports=a.sports, dports=a.dports, sizes=a.sizes, ramp_to=a.ramp_to,
                     ramp_time=a.ramp_time, cores=a.cores, probe_rate=a.probe_rate, probe_size=a.probe_size,
                     bidirectional=a.bidirectional, flow_rate=a.flow_rate, flows_max=a.flows_max, rx_port=a.rx_port)


def _given_fields(a) -> dict:
    """The DpdkFlows fields perfkit flows' command line gave (beside a flows file): the options
    cli.check_options found given (perfkit_given), else those that differ from their defaults."""
    names = {f.name for f in dataclasses.fields(DpdkFlows)}
    given = getattr(a, "perfkit_given", None)
    if given is None:
        defaults = {f.name: f.default for f in dataclasses.fields(DpdkFlows)}
        given = {k for k in names if hasattr(a, k) and getattr(a, k) not in (defaults[k], None)}
    return {k: getattr(a, k) for k in given if k in names and hasattr(a, k)}


def _frames_text(spec) -> str:
    if spec.sizes is None:
        return f"{spec.size} B frames"
    mix = ",".join(f"{s}:{w}" for s, w in spec.sizes)
    return f"frames of {mix} (mean {spec.mean_size:.1f} B)"


def flows_header(spec) -> str:
    far = f"{spec.peer} ({spec.mode})" if spec.peer else f"{spec.peer_ip} ({spec.mode}, elsewhere)"
    if spec.rx_port:
        far += f", back on {spec.rx_port}"
    return (f"perfkit flows: {_frames_text(spec)}, {spec.rate or 'unlimited'}"
            f"{f' rising to {spec.ramp_to} over {spec.ramp_time:g} s' if spec.ramp_to else ''}, {spec.flows} flow(s)"
            f"{f' growing to {spec.flows_max} at {spec.flow_rate:g}/s' if spec.flows_max else ''}, "
            f"{spec.duration:g} s from {spec.port} to {far} (dpdk engine)")


def flows_flood(spec) -> tuple | None:
    """(what, target) of flows with no rate and no peer port here: they flood whatever is at peer_ip."""
    if spec.rate is None and spec.peer is None:
        return (f"flows with no --rate send as fast as {spec.port} goes", spec.peer_ip)
    return None


def directions_text(s: dict) -> str:
    """Both directions apart (a bidirectional or reverse run): one line each, a -> b and b -> a."""
    text = ""
    n = lambda v: "-" if v is None else f"{v:,}"  # noqa: E731
    for way, name in (("a_to_b", "a -> b"), ("b_to_a", "b -> a")):
        if f"{way}_sent" not in s:
            continue
        rate = s[f"{way}_rx_pps"] if s[f"{way}_rx_pps"] is not None else s[f"{way}_tx_pps"]
        bps = s[f"{way}_rx_bps"] if s[f"{way}_rx_bps"] is not None else s[f"{way}_tx_bps"]
        line = (f"sent {n(s[f'{way}_sent'])}  received {n(s[f'{way}_received'])}  lost {n(s[f'{way}_lost'])}"
                f"  reorder {n(s[f'{way}_reorder'])}  dup {n(s[f'{way}_dup'])}")
        if rate is not None:
            line += f"  {rate:,.0f} pps  {bps / 1e6:,.3g} Mbps"
        if s.get(f"{way}_lat_p50_us") is not None:
            line += (f"  lat p50 {format_time_us(s[f'{way}_lat_p50_us'])} p99 "
                     f"{format_time_us(s[f'{way}_lat_p99_us'])}")
        line += f"  nic tx {n(s[f'{way}_nic_tx'])} rx {n(s[f'{way}_nic_rx'])}"
        text += f"\n    {name:<13} =  {line}"
    return text


def flows_summary_extra(s: dict) -> str:
    """The lines perfkit flows adds to the summary: p99.99 latency, the probes' latency, each direction."""
    text = directions_text(s)
    if s.get("lat_p9999_us") is not None:
        text += f"\n    {'lat p99.99':<13} =  {s['lat_p9999_us']:.1f} us"
    if s.get("probe_tx"):
        f = lambda v: "-" if v is None else f"{v:.1f} us"  # noqa: E731
        text += (f"\n    {'probe lat':<13} =  p50 {f(s['probe_lat_p50_us'])}  p99 {f(s['probe_lat_p99_us'])}"
                 f"  max {f(s['probe_lat_max_us'])} ({s['probe_rx']} of {s['probe_tx']} probes)")
    return text


def socket_reflect_from_args(a) -> SocketReflect:
    """perfkit reflect --engine socket: a kernel UDP socket on --ip:--udp-port."""
    for k, default in (("port", None), ("peer", None), ("tx_port", None), ("dst_mac", None), ("peer_dst_mac", None)):
        if getattr(a, k) != default:
            raise ValueError(f"{k.replace('_', '-')}: a DPDK option; the socket engine serves --ip:--udp-port")
    return SocketReflect(host=a.ip or "127.0.0.1", port=a.udp_port, mode=a.mode, flows=a.flows,
                         duration=a.duration, netns=a.netns)


def socket_reflect_header(spec) -> str:
    return (f"perfkit reflect: {spec.mode} on udp {spec.host}:{spec.port}"
            f"{' in ' + spec.netns if spec.netns else ''} for {spec.duration:g} s (socket engine)")


def reflect_from_args(a):
    """perfkit reflect's spec from its parsed arguments: a SocketReflect on the socket engine, else a DpdkReflect."""
    return socket_reflect_from_args(a) if a.engine == "socket" else dpdk_reflect_from_args(a)


def dpdk_reflect_from_args(a) -> DpdkReflect:
    """perfkit reflect's spec on the dpdk engine from its parsed arguments."""
    if not a.port:
        raise ValueError("port: give the DPDK port (--port ring:NAME:1, net_memif0,..., net_af_packet0,iface=IF)")
    return DpdkReflect(port=a.port, mode=a.mode, duration=a.duration, ip=a.ip or "198.18.0.2", flows=a.flows,
                       burst=a.burst, netns=a.netns, ips=a.ips, cores=a.cores, peer=a.peer,
                       dst_mac=a.dst_mac, peer_dst_mac=a.peer_dst_mac, tx_port=a.tx_port)


def reflect_header(spec) -> str:
    where = (f"between {spec.port} and {spec.peer}" if spec.mode == "forward" else f"on {spec.port} ({spec.ip})"
             + (f", sending by {spec.tx_port}" if spec.tx_port else ""))
    return f"perfkit reflect: {spec.mode} {where} for {spec.duration:g} s (dpdk engine)"


def reflect_text(s: dict, last: dict) -> str:
    """perfkit reflect's summary (rxonly, reverse): s the run's summary, last its last row."""
    secs = last.get("time_s") or 0.0
    lines = [f"{s.get('test', 'reflect')}:"]
    for name, value in (("received", s.get("pkts_rx", 0)), ("sent back", s.get("pkts_tx", 0)),
                        ("udp", last.get("udp_rx", 0)), ("arp", last.get("arp_rx", 0)),
                        ("icmp", last.get("icmp_rx", 0)), ("other", last.get("other_rx", 0)),
                        ("malformed", last.get("bad_rx", 0)), ("drop_tx", s.get("drop_tx", 0))):
        lines.append(f"    {name:<13} =  {round(value):,}")
    if secs:
        lines.append(f"    {'rx_rate':<13} =  {s.get('pkts_rx', 0) / secs:,.0f} /sec over {secs:.3g} s")
    if s.get("lost") or s.get("dup") or s.get("reorder"):
        lines.append(f"    {'seq':<13} =  {s['lost']:,} lost, {s['dup']:,} dup, {s['reorder']:,} reordered")
    if s.get("lat_count"):
        lines.append(f"    {'lat':<13} =  one-way p50 {s['lat_p50_us']:.3g} us  p99 {s['lat_p99_us']:.3g} us")
    return "\n".join(lines)


def forward_text(s: dict, last: dict) -> str:
    """perfkit reflect --mode forward's summary: each direction's counts."""
    secs = last.get("time_s") or 0.0
    lines = [f"{s.get('test', 'dpdk_forward')}:"]
    for d in s.get("forward", []):
        rate = f", {d['fwd'] / secs:,.0f} /sec over {secs:.3g} s" if secs else ""
        lines.append(f"    {d['from']} -> {d['to']}:")
        lines.append(f"        received {d['rx']:,}  forwarded {d['fwd']:,}  drop_tx {d['drop_tx']:,}  "
                     f"malformed {d['bad_rx']:,}{rate}")
        lines.append(f"        nic ({d['from']}): imissed {d['nic_imissed']:,}  ierrors {d['nic_ierrors']:,}  "
                     f"oerrors {d['nic_oerrors']:,}")
    return "\n".join(lines)


CLI_PARSERS = {"flows": _flows_parser, "reflect": _reflect_parser}   # command -> adds its parser to subparsers
CLI_SPECS = {"flows": flows_from_args, "reflect": reflect_from_args}   # command -> its spec from parsed args
