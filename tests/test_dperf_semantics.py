"""dperf's meaning of a file (issue 32, "same file, same test"), checked field by field against
dperf's configuration manual and its code's defaults (src/config.h), then run over in-process
ring pairs with identities on the counters: duration = slow_start + duration, payload_size the
whole message (raw below 70 bytes), keep-alive on a fixed grid per connection, the cpu line
pinning the workers, and dperf's defaults (duration 60 s, retransmit_timeout 2 s)."""
import dataclasses
import os

import pytest

from perfkit import dperf
from perfkit.kinds import dpdk_tcp as kind
from perfkit.spec import DpdkHttpClient, DpdkHttpServer
from _pressure import CpuPressure

CLIENT = ("mode client\ncpu 0\nport ring:{ring}:0 198.18.0.1 198.18.0.2\nclient 198.18.0.1 1\n"
          "server 198.18.0.2 1\nlisten 80 1\n")
SERVER = ("mode server\ncpu 0\nport ring:{ring}:1 198.18.0.2 198.18.0.1\nclient 198.18.0.1 1\n"
          "server 198.18.0.2 1\nlisten 80 1\n")


def client(extra="", ring="sx"):
    return dperf.parse(CLIENT.format(ring=ring) + extra, "c.conf").to_spec()


def server(extra="", ring="sx"):
    return dperf.parse(SERVER.format(ring=ring) + extra, "s.conf").to_spec()


def test_defaults_are_dperfs():
    """No duration: dperf's DEFAULT_DURATION 60 s (its manual says 100s; its code runs 60), plus
    slow_start 30 s on a client (wait 3 s comes before both); retransmit_timeout 2 s (RTO_DEFAULT);
    no tx_burst: perfkit's own burst, not dperf's 8."""
    c = client("cps 1k\n")
    assert (c.duration, c.slow_start, c.wait) == (60 + 30, 30, 3)
    assert c.retransmit_timeout == 2.0
    assert c.burst == DpdkHttpClient.__dataclass_fields__["burst"].default != 8
    s = server()
    assert s.duration == 60 and s.retransmit_timeout == 2.0
    assert s.burst == DpdkHttpServer.__dataclass_fields__["burst"].default
    assert client("cps 1k\ntx_burst 8\n").burst == 8


def test_duration_adds_the_slow_start():
    """dperf runs slow_start + duration: the ramp is added, not counted inside."""
    c = client("cps 1k\nduration 10s\nslow_start 20\nwait 0\n")
    assert (c.duration, c.slow_start, c.wait) == (30, 20, 0)
    assert client("cps 1k\nduration 2m\n").duration == 150
    assert server("duration 10s\n").duration == 10    # a server has no slow start


def test_retransmit_timeout_and_keepalive_limits_are_dperfs():
    assert client("cps 1k\nretransmit_timeout 300\n").retransmit_timeout == 300   # RTO_MAX
    with pytest.raises(dperf.DperfError, match=r"c.conf:8: retransmit_timeout: '301' is not seconds in 1..300"):
        client("cps 1k\nretransmit_timeout 301\n")
    assert client("cc 10\nkeepalive 1ms 32767\n").keepalive_requests == 32767   # KEEPALIVE_REQ_NUM
    with pytest.raises(dperf.DperfError, match=r"c.conf:8: keepalive: 32768: at most 32767 requests"):
        client("cc 10\nkeepalive 1ms 32768\n")


def test_cpu_line_pins_the_workers():
    c = client("cps 1k\n")
    assert c.cpus == (0,) and [w["cpu"] for w in kind.plan(c)["workers"]] == [0]
    text = ("mode client\ncpu 2 5-7\nport ring:p:0 198.18.0.1 198.18.0.2\nport ring:q:0 198.18.1.1 198.18.1.2\n"
            "client 198.18.0.1 1\nclient 198.18.1.1 1\nserver 198.18.0.2 2\nserver 198.18.1.2 2\ncps 1k\n")
    c = dperf.parse(text, "c.conf").to_spec()
    assert c.cpus == (2, 5, 6, 7) and c.queues == 2
    # dperf divides the cpus among the ports in order: port 1 gets 2 and 5, port 2 gets 6 and 7
    assert [(w["port"], w["queue"], w["cpu"]) for w in kind.plan(c)["workers"]] == [
        (0, 0, 2), (0, 1, 5), (1, 0, 6), (1, 1, 7)]
    assert "cpu" not in kind.plan(DpdkHttpClient())["workers"][0]   # the native spec: not pinned


def _head_and_body(resp: bytes):
    head, _, body = resp.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", body


@pytest.mark.parametrize("size", [70, 100, 999, 1000, 1400, 5000])
def test_payload_size_is_the_whole_response(size):
    """dperf's payload_size on a server: headers plus body, exactly; Content-Length counts the body."""
    s = server(f"payload_size {size}\nkeepalive 1s\n")
    r = s.response_bytes()
    head, body = _head_and_body(r)
    assert len(r) == size and s.response_size == size and not s.raw
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and f"Content-Length: {len(body)}\r\n".encode() in head
    assert b"Connection: keep-alive" in head


def test_payload_size_below_dperfs_http_minimum_is_raised_to_70():
    s = server("payload_size 10\n")
    assert len(s.response_bytes()) == 70 == s.response_size and b"Connection: close" in s.response_bytes()
    c = client("cps 1k\npayload_size 10\n")
    assert len(c.request_bytes()) == 70 and not c.raw   # a GET padded to 70


@pytest.mark.parametrize("size", [70, 71, 74, 75, 76, 80, 300, 1400])
def test_payload_size_pads_a_get_client_request_to_exactly_that_size(size):
    c = client(f"cps 1k\npayload_size {size}\n")
    r = c.request_bytes()
    assert len(r) == size and r.startswith(b"GET / HTTP/1.1\r\nHost: dperf\r\n") and r.endswith(b"\r\n\r\n")


def test_packet_size_below_the_http_minimum_is_a_raw_payload():
    """packet_size 64: 64 - 54 B of Ethernet, IPv4 and TCP headers = 10 B, under 70: dperf's
    non-HTTP payload, the same size each way."""
    s, c = server("packet_size 64\n"), client("cps 1k\npacket_size 64\n")
    assert s.raw and c.raw and s.response_bytes() == b"a" * 10 == c.request_bytes()
    s = server("packet_size 1514\n")    # a full frame: 1460 B of HTTP
    assert not s.raw and len(s.response_bytes()) == 1460
    with pytest.raises(ValueError, match="raw: a raw payload needs its size"):
        DpdkHttpServer(raw=True)
    with pytest.raises(ValueError, match="response_size: 20 B is below the 57 B"):
        DpdkHttpServer(response_size=20)


def _pair(srv_text, cli_text, tag, **cli_over):
    from _dpdk_tests import run_pair
    srv = dataclasses.replace(dperf.parse(srv_text.format(ring=tag), "s.conf").to_spec(), duration=60, cpus=())
    cli = dataclasses.replace(dperf.parse(cli_text.format(ring=tag), "c.conf").to_spec(), slow_start=0, wait=0,
                              cpus=(), **cli_over)
    return run_pair(srv, cli, stop_timeout=20.0)


def test_a_1400_payload_size_server_sends_1400_byte_payloads_in_one_segment(eal):
    from _dpdk_tests import no_leaks
    c, s, _ = _pair(SERVER + "payload_size 1400\nkeepalive 1s\n", CLIENT + "cc 10\nkeepalive 5ms\ncps 1k\n",
                    "sp1", duration=0.6)
    resp = c["http_resp"]
    assert resp > 10 and c["http_2xx"] == resp == c["http_req"] and c["http_err"] == c["sock_error"] == 0
    assert s["bytes_tx"] == c["bytes_rx"] and s["pkts_tx"] == c["pkts_rx"]     # a ring loses nothing
    assert s["retrans_push"] == 0
    # each response one frame of 14 + 20 + 20 + 1400 B (+ 4 FCS, as the engine counts): the server's
    # other frames (SYN-ACK, ACKs, FIN) are small; a response in two segments would leave a big one
    others = s["pkts_tx"] - resp
    rest = s["bytes_tx"] - resp * (1454 + 4)
    assert others > 0 and 58 * others <= rest <= 66 * others, (resp, others, rest)
    no_leaks()


def test_a_raw_payload_goes_each_way_without_http(eal):
    from _dpdk_tests import no_leaks
    c, s, _ = _pair(SERVER + "packet_size 64\nkeepalive 1s\n", CLIENT + "cc 5\nkeepalive 5ms\ncps 1k\n"
                    "packet_size 64\n", "sp2", duration=0.5)
    n = c["http_req"]
    assert n > 5 and c["http_resp"] == n and c["http_2xx"] == 0 == c["http_err"] == c["sock_error"]
    assert s["http_get"] == s["http_post"] == 0 == c["http_get"] == c["http_post"]   # no HTTP at all
    assert s["bytes_tx"] == c["bytes_rx"] and c["bytes_tx"] == s["bytes_rx"]
    no_leaks()


@pytest.mark.parametrize("ivl", [0.05, 0.1])
def test_keepalive_keeps_a_fixed_grid_per_connection(eal, ivl):
    """cc 100, keepalive INTERVAL: each connection sends a request every INTERVAL from its first
    on, whatever its responses take: requests = cc x (seconds / interval), within two intervals
    a connection (its last cut by the end, a stall at the very end). Waiting the interval after
    each response gives cc x seconds / (interval + response time): on this shared machine a ring
    pair's response takes 10-30 ms (both workers share two CPUs with everything else), which
    the bound tells apart. (An interval under the response time cannot be kept by
    stop-and-wait: one request is out a connection at a time.)"""
    from _dpdk_tests import no_leaks
    secs, cc = 2.0, 100
    with CpuPressure() as psi:
        c, s, _ = _pair(SERVER + "keepalive 1s\n", CLIENT + f"cc {cc}\nkeepalive {int(ivl * 1000)}ms\ncps 100k\n",
                        f"sp3{int(ivl * 1000)}", duration=secs)
    req, per = c["http_req"], secs / ivl
    rt = c["lat_sum_ns"] / c["lat_count"] / 1e9
    assert c["sock_open"] == cc and c["http_resp"] == req == s["http_get"] and c["sock_error"] == 0
    why = (req, cc * per, f"mean response {rt * 1e3:.2f} ms", psi.why)
    if req < cc * (per - 2) and psi.starved and rt > ivl / 2:
        # responses near the interval: a grid still beats waiting the interval after each one
        assert req > 1.2 * cc * secs / (ivl + rt), why
        pytest.skip(f"{req} requests, the grid's {cc * per:.0f} less two intervals a connection not kept: "
                    f"mean response {rt * 1e3:.0f} ms of a {ivl * 1e3:.0f} ms interval; {psi.why}")
    assert cc * (per - 2) <= req <= cc * (per + 1), why
    no_leaks()


def test_a_cpu_this_process_may_not_use_is_refused_in_one_line(eal):
    from perfkit.engines import dpdk_tcp
    bad = max(os.sched_getaffinity(0)) + 1000
    spec = dataclasses.replace(client("cps 1k\n", ring="sp4"), cpus=(bad,))
    with pytest.raises(ValueError, match=rf"cpus: CPU {bad} not among the CPUs this process may use"):
        dpdk_tcp.build(spec)


def _worker_cpus(name: str) -> set:
    """The CPU lists of this process's threads named name (the engine names its workers)."""
    out = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/self/task/{tid}/status") as f:
                out |= {ln.split(":", 1)[1].strip() for ln in f if ln.startswith("Cpus_allowed_list")}
        except OSError:
            continue
    return out


def test_the_cpu_line_pins_the_running_workers(eal):
    """cpu N: the worker runs pinned to CPU N (dperf's pinning), seen in /proc while it runs."""
    from _dpdk_tests import run_pair
    cpu = max(os.sched_getaffinity(0))
    srv = dataclasses.replace(server("keepalive 1s\n", ring="sp5"), duration=30, cpus=())
    cli = dataclasses.replace(client("cc 2\nkeepalive 10ms\ncps 1k\n", ring="sp5"), slow_start=0, wait=0,
                              duration=0.6, cpus=(cpu,))
    c, _, seen = run_pair(srv, cli, during=lambda cli_h, srv_h: _worker_cpus("pk-tcp-cli"))
    assert {str(cpu)} in seen, seen
    assert set().union(*seen) <= {str(cpu)} and c["http_resp"] > 0
