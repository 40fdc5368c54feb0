"""DPDK ports that reach a Linux kernel, in a lab namespace (issue 5): net_af_xdp on a
lab veth and net_tap (a tap device in a lab host). Each test first opens its port and
skips, with DPDK's reason, where the PMD does not start here; where it starts, the
kernel's own counters must equal perfkit's TX, and the kernel's ARP and ping must be
answered. (net_af_packet is tested in test_dpdk.py.)
"""
import ipaddress
import os
import subprocess
import sys
import textwrap

import pytest

from perfkit.errors import EngineError
from perfkit.spec import DpdkFlows, DpdkReflect
from perfkit.stats import COUNTER_NAMES

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from _dpdk_tests import counters, wait_done, kernel_counts, pings_answered, child_line  # noqa: E402,F401
from _labs import udp_stats, ping, if_mac  # noqa: E402,F401


def _build_or_skip(spec, what):
    try:
        return dpdk.build(spec)
    except EngineError as exc:
        pytest.skip(f"{what} does not start here: {exc}")


# af_xdp runs in a child process: DPDK 22.11's af_xdp close keeps the interface's xsk
# socket, its BPF program and map fds and the umem's 2048 mbufs until the process ends
# (a second port on the interface then fails with EINVAL): the child takes them with it.
AF_XDP_CHILD = textwrap.dedent("""
    import json, sys, time
    from perfkit import _dpdk
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    from perfkit.spec import DpdkFlows, DpdkReflect
    from perfkit.stats import COUNTER_NAMES
    role, dev, netns, mine, peer = sys.argv[1:6]
    dpdk.eal()
    try:
        if role == "flows":
            h = dpdk.build(DpdkFlows(port=dev, netns=netns, ip=mine, peer_ip=peer, rate="20kpps", flows=4,
                                     size=128, duration="1s"))
        else:
            h = dpdk.build(DpdkReflect(port=dev, netns=netns, ip=mine, duration="6s"))
    except EngineError as exc:
        print(json.dumps({"skip": str(exc)}), flush=True)
        sys.exit(0)
    h.start()
    print(json.dumps({"ready": True}), flush=True)
    if role == "reflect":
        sys.stdin.readline()   # the parent has pinged
        h.stop()
    while h.running():
        time.sleep(0.01)
    h.join()
    c = dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))
    mac = h.dst_mac(0)
    h.close()
    print(json.dumps({"c": c, "mac": mac}), flush=True)
""")


def _child(role, dev, netns, mine, peer=""):
    return subprocess.Popen([sys.executable, "-P", "-c", AF_XDP_CHILD, role, dev, netns, mine, peer or "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_af_xdp_on_a_lab_veth(eal, lab):
    h1, h2 = lab.hosts
    net = ipaddress.ip_network(f"{h1.ipv4}/24", strict=False)
    mine1, mine2 = str(net.network_address + 200), str(net.network_address + 201)
    before = lab.call(h2, udp_stats)
    child = _child("flows", f"net_af_xdp0,iface={h1.ifname}", h1.netns_path, mine1, h2.ipv4)
    try:
        child_line(child)
        done = child_line(child)
    finally:
        child.communicate(timeout=30)
    after = lab.call(h2, udp_stats)
    tx = done["c"]
    got = (after["InDatagrams"] - before["InDatagrams"]) + (after["NoPorts"] - before["NoPorts"])
    assert done["mac"] == [lab.call(h2, if_mac, h2.ifname), False]   # ARP answered by h2's kernel
    assert tx["pkts_tx"] == 20_000 and got == tx["pkts_tx"]           # the kernel got every frame
    assert after["InCsumErrors"] == before["InCsumErrors"] and after["InErrors"] == before["InErrors"]
    # the reflector on h2's end of the veth answers h1's kernel pings
    child = _child("reflect", f"net_af_xdp0,iface={h2.ifname}", h2.netns_path, mine2)
    try:
        child_line(child)
        answered = lab.call(h1, ping, mine2, 3, timeout=20)
        child.stdin.write("done\n")
        child.stdin.flush()
        c = child_line(child)["c"]
    finally:
        child.communicate(timeout=30)
    assert answered == 3 and c["icmp_rx"] >= 3 and c["bad_rx"] == 0


def test_tap_into_a_lab_hosts_kernel(eal, lab):
    # the tap device appears in h1's namespace; h1's kernel gets an address on it
    h1 = lab.hosts[0]
    dev = "net_tap0,iface=pktap0"
    ns = os.path.basename(h1.netns_path)
    kernel_ip, mine = "198.19.77.1", "198.19.77.2"

    def prepare():
        subprocess.run(["ip", "-n", ns, "addr", "replace", f"{kernel_ip}/24", "dev", "pktap0"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "pktap0", "up"], check=True)

    h = _build_or_skip(DpdkFlows(port=dev, netns=h1.netns_path, ip=mine, peer_ip=kernel_ip, rate="20kpps",
                                 flows=4, size=128, duration="1s"), "net_tap")
    prepare()
    mac = kernel_counts(lab, h, h1)
    assert mac != "ff:ff:ff:ff:ff:ff"
    refl = _build_or_skip(DpdkReflect(port=dev, netns=h1.netns_path, ip=mine, duration="4s"), "net_tap")
    prepare()
    pings_answered(lab, refl, h1, mine)


@pytest.mark.parametrize("cores", [1, 2])
def test_nic_counters_are_the_pmds_own_once_per_port(eal, lab, cores):
    """The counter rows carry the PMD's ierrors/oerrors/imissed (rte_eth_stats): a tap
    whose kernel side is down fails every write, which the tap PMD counts in oerrors.
    The engine's nic_oerrors, summed over its workers, equal the PMD's own delta: one
    worker per port reports them (not once per queue), read last after every queue stopped."""
    h1 = lab.hosts[0]
    ns = os.path.basename(h1.netns_path)
    try:
        p = _dpdk.Port("net_tap0,iface=pktap0", netns=h1.netns_path, ip="198.19.77.2", queues=cores)
    except EngineError as exc:
        pytest.skip(f"net_tap with {cores} queue(s) does not start here: {exc}")
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "pktap0", "down"], check=True)
        h = _dpdk.DpdkEngine([p], [{"role": "dpdk_send", "port": 0, "queue": k, "flows": 2, "flow_first": 2 * k,
                                    "rate": 1000.0, "duration": 0.2, "dst_ip": "198.19.77.1",
                                    "dst_mac": "02:00:00:00:00:01"} for k in range(cores)])
        before = p.stats()
        try:
            h.start()
            wait_done(h)
            cs = [counters(h, k) for k in range(cores)]
            after = p.stats()   # now, as the workers' last read: closing may still flush frames
            rows_have = set(COUNTER_NAMES) >= {"nic_ierrors", "nic_oerrors", "nic_imissed"}
        finally:
            h.close()
    finally:
        p.close()
    delta = {k: after[k] - before[k] for k in before}
    assert rows_have
    assert delta["oerrors"] > 0 and sum(c["nic_oerrors"] for c in cs) == delta["oerrors"]
    assert [c["nic_oerrors"] > 0 for c in cs] == [True] + [False] * (cores - 1)   # the port's first worker
    assert sum(c["nic_ierrors"] for c in cs) == delta["ierrors"]
    assert sum(c["nic_imissed"] for c in cs) == delta["imissed"]
    assert all(c["pkts_tx"] == 0 and 0 < c["drop_tx"] <= 32 for c in cs)   # nothing left; the pending dropped
    assert dpdk.resources()["mbufs_free"] == dpdk.resources()["mbufs"]
