"""The DPDK TCP engine's receive path (native/dpdk/tcp_*.c) under ASan and UBSan, outside Python:
tests/native/tcp_frame_fuzz.c is linked with the engine and hands its real tcp_handle_frame()
random IPv6 and IPv4 frames, each in a heap block of exactly its length, so a read past
any frame is a sanitizer report (fatal). Server and client engines of both families, TCP and
protocol udp (whose frames are mostly datagrams to the sockets of its table; the IPv6 UDP
client keeps 4 requests out a socket, dperf's pipeline);
most frames carry valid checksums and some hit live sockets in sequence, so parsing goes
through TCP, HTTP, ICMPv6 echo and Neighbor Discovery, not only the first checks. A fifth
of the IPv6 frames carry extension-header chains (perfkit/ip6ext.h's walk: well formed,
cut, too long, Hop-by-Hop out of place, fragments, segments left), many of them still
reaching TCP or ICMPv6 behind the chain. Two IPv4 engines with vxlan (tcp_vxlan.c) take most
frames in outer Ethernet/IPv4/UDP/VXLAN headers, each outer field now and then wrong or cut."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which("pkg-config"):
        pytest.skip("no C compiler or pkg-config to build the fuzz driver")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libdpdk"], capture_output=True, text=True)
    if flags.returncode != 0:
        pytest.skip("libdpdk is not installed (Debian: libdpdk-dev)")
    cflags = subprocess.run(["pkg-config", "--cflags", "libdpdk"], capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "libdpdk"], capture_output=True, text=True).stdout.split()
    exe = tmp_path_factory.mktemp("tff") / "tcp_frame_fuzz"
    # probe.c is meson's check that libdpdk links: a program with a main of its own
    engine_sources = sorted(c for c in (ROOT / "native/dpdk").glob("*.c") if c.name != "probe.c")
    subprocess.run([cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(ROOT / "native/dpdk"), "-I", str(ROOT / "native/include"),
                    "-I", str(ROOT / "native/common"), *cflags, str(ROOT / "native/common/engine.c"),
                    str(ROOT / "tests/native/tcp_frame_fuzz.c"), *map(str, engine_sources),
                    "-o", str(exe), *libs, "-lpthread"], check=True, timeout=300)
    return exe


@pytest.mark.parametrize("seed", [1, 2])
def test_random_frames_under_asan(driver, seed):
    # the EAL argument copy perfkit keeps for the life of the process reads as a leak
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    p = subprocess.run([str(driver), "30000", str(seed)], capture_output=True, text=True, timeout=300, env=env)
    if p.returncode == 4 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()[-300:]}")
    print(p.stdout)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "runtime error" not in p.stderr and "AddressSanitizer" not in p.stderr, p.stderr[-4000:]
    rows = {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", m.group(2))}
            for m in re.finditer(r"^(ipv[46]-[\w-]+) (.*)$", p.stdout, re.M)}
    udp = {"ipv6-udp-server", "ipv6-udp-client", "ipv4-udp-server", "ipv4-udp-client"}
    vx = {"ipv4-vxlan-server", "ipv4-vxlan-client"}
    assert set(rows) == {"ipv6-server", "ipv6-client", "ipv4-server", "ipv4-client"} | udp | vx, p.stdout
    for name in vx:   # decapsulated deep (handshakes, HTTP), refusals counted, every frame out encapsulated
        r = rows.pop(name)
        assert r["frames"] == 30000 and r["seen"] >= r["frames"] and r["vxlan_drop"] > 500, (name, r)
        assert r["bad"] > 1000 and r["tcp"] > 1000 and r["icmp"] > 500 and r["replies"] > 0, (name, r)
        assert r["opened"] > 100 and r["requests"] > 10 and r["tx"] > 100, (name, r)
    for name in udp:   # protocol udp (tcp_udp.c): datagrams to the table's sockets, answered or dropped
        r = rows.pop(name)
        assert r["frames"] == 30000 and r["seen"] >= r["frames"] and r["tcp"] < 100, (name, r)
        assert r["bad"] > 1000 and r["icmp"] > 1000 and r["udp_tx"] > 100 and r["udp_drop"] > 100, (name, r)
        assert r["requests"] > 100 and (r["responses"] > 10 if "client" in name else r["opened"] == 0), (name, r)
    for name, r in rows.items():
        assert r["frames"] == 30000 and r["seen"] >= r["frames"], (name, r)
        assert r["bad"] > 1000 and r["tcp"] > 1000 and r["icmp"] > 1000 and r["replies"] > 0, (name, r)
        assert r["opened"] > 100 and r["requests"] > 10, (name, r)   # deep: handshakes and HTTP bytes
    for name in ("ipv6-server", "ipv6-client"):   # ~6000 chains; ~1250 go through to TCP or ICMPv6
        assert rows[name]["ext"] > 3000 and rows[name]["ext_deep"] > 500, (name, rows[name])
    assert rows["ipv6-client"]["responses"] > 0 and rows["ipv4-client"]["responses"] > 0
