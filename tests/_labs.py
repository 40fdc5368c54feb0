"""What the lab tests share: a two-host lab (or a skip where root or the lab is missing),
one whose h2 sends with checksum offload off, nginx in h2, and what runs inside a lab host
through lab.call: the kernel's UDP counters, an interface's MAC and an ICMP echo from a raw
socket; and the close-while-joining check every engine passes. No DPDK here."""
import contextlib
import os
import struct
import subprocess
import threading
import time

import pytest


def lab_module_or_skip():
    """perfkit.lab, or a skip where this process cannot make namespaces."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the lab makes network namespaces")
    from perfkit import lab as lab_mod
    if not lab_mod.have_privileges():
        pytest.skip("needs CAP_NET_ADMIN and CAP_SYS_ADMIN for the lab")
    return lab_mod


def lab_up_or_skip(lab_mod, **kw):
    """A lab that is up (two hosts unless kw says otherwise), or a skip with the reason."""
    try:
        return lab_mod.Lab(**{"hosts": 2, **kw}).up()
    except Exception as exc:  # noqa: BLE001 (a lab that cannot be made here is a skip)
        pytest.skip(f"no lab here: {exc}")


def ethtool_or_skip(host, *features):
    """ethtool -K on a lab host's veth (e.g. "tx", "off"), or a skip with ethtool's reason."""
    p = subprocess.run(["ip", "netns", "exec", host.netns, "ethtool", "-K", host.ifname, *features],
                       capture_output=True, text=True, timeout=20)
    if p.returncode != 0:
        pytest.skip(f"ethtool cannot set {' '.join(features)} on {host.ifname}: {p.stderr.strip()}")


@contextlib.contextmanager
def offload_off_lab(lab_mod):
    """A two-host lab whose h2 sends with checksum offload off (a DPDK port on h1's veth then
    gets TCP checksums whole, not the partial sum an offload leaves), or a skip; down after."""
    lab = lab_up_or_skip(lab_mod)
    try:
        ethtool_or_skip(lab.hosts[1], "tx", "off")
        yield lab
    finally:
        lab.down()


def nginx_in_h2(lab, d, family=4):
    """nginx (tests/_nginx.py, files in d) in the lab's h2 at its address of the family (4 or 6),
    port 8080; use it as a context manager."""
    from _nginx import Nginx
    h2 = lab.hosts[1]
    return Nginx(d, host=h2.ipv4 if family == 4 else f"[{h2.ipv6}]", netns=h2.netns)


def csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of data."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_stats():
    """The kernel's UDP counters (/proc/net/snmp) in the caller's namespace."""
    with open("/proc/net/snmp") as f:
        rows = [ln.split() for ln in f if ln.startswith("Udp:")]
    return dict(zip(rows[0][1:], map(int, rows[1][1:])))


def if_mac(ifname):
    import fcntl
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # in the caller's namespace (sysfs is not)
    try:
        info = fcntl.ioctl(s.fileno(), 0x8927, struct.pack("256s", ifname.encode()[:15]))  # SIOCGIFHWADDR
    finally:
        s.close()
    return ":".join(f"{b:02x}" for b in info[18:24])


def ping(addr, count, ident=0x4242):
    """ICMP echo from a raw socket (no ping binary needed): how many were answered, each
    reply with a valid checksum."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(1.0)
    answered = 0
    try:
        for seq in range(count):
            body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"perfkit"
            body = body[:2] + struct.pack("!H", csum(body)) + body[4:]
            s.sendto(body, (addr, 0))
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    data, (src, _) = s.recvfrom(2048)
                except socket.timeout:
                    break
                icmp = data[(data[0] & 15) * 4:]
                if src == addr and icmp[0] == 0 and icmp[4:8] == struct.pack("!HH", ident, seq) \
                        and csum(icmp) == 0:
                    answered += 1
                    break
    finally:
        s.close()
    return answered


def close_while_another_thread_joins(h, within=2.0):
    """Start engine h, wait in join() in a thread and close() from another: close() stops the
    workers and waits for that join before it frees them (joined once, nothing freed under
    the joiner); both return within `within` s and a later join() says the engine is closed."""
    from perfkit.errors import EngineError
    h.start()
    joined, closed = [], []
    joiner = threading.Thread(target=lambda: joined.append(h.join()), daemon=True)
    joiner.start()
    time.sleep(0.05)
    # close() in a thread too: a broken one hangs there, and the test fails instead
    closer = threading.Thread(target=lambda: closed.append(h.close()), daemon=True)
    closer.start()
    closer.join(within)
    joiner.join(within)
    assert closed == [None], f"close() did not return within {within:g} s"
    assert joined == [None], f"join() did not return within {within:g} s of close()"
    with pytest.raises(EngineError, match="closed"):
        h.join()
