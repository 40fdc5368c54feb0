"""dperf's modes (issue 32): disable_ack -- read from a dperf-style file field by field, then
run perfkit's client against perfkit's server over an in-process ring pair, both sides
counting the same connections, requests and frames."""
import dataclasses
import functools

import pytest

from perfkit import dperf
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

CLIENT = ("mode client\ntx_burst 32\nport ring:{ring}:0 198.18.0.1 198.18.0.2\nclient 198.18.0.1 1\n"
          "server 198.18.0.2 1\nlisten 80 1\ncps 300\ncc 20\nkeepalive 20ms\nduration 2s\n")


def test_disable_ack_is_read_and_reaches_the_client_spec():
    c = dperf.parse(CLIENT.format(ring="pa") + "disable_ack\n", "m.conf")
    assert c.disable_ack
    s = c.to_spec()
    assert isinstance(s, DpdkHttpClient) and s.disable_ack
    assert (s.cc, s.keepalive, s.cps) == (20, 0.02, 300)
    assert not dperf.parse(CLIENT.format(ring="pa"), "m.conf").to_spec().disable_ack
    with pytest.raises(dperf.DperfError, match=r"m.conf:11: disable_ack: .*no arguments"):
        dperf.parse(CLIENT.format(ring="pa") + "disable_ack 1\n", "m.conf")


@pytest.mark.parametrize("disable_ack", [False, True])
def test_disable_ack_leaves_responses_to_the_next_request_to_acknowledge(eal, disable_ack):
    from _dpdk_tests import no_leaks, run_pair
    text = CLIENT.format(ring=f"pd{int(disable_ack)}") + ("disable_ack\n" if disable_ack else "")
    # dperf's slow_start (10 s at least) and wait would outlast the test: the spec's own are 0
    cli = dataclasses.replace(dperf.parse(text, "m.conf").to_spec(), slow_start=0, wait=0, duration=1.2)
    srv = DpdkHttpServer(port=f"ring:pd{int(disable_ack)}:1", ip="198.18.0.2", payload_size=64,
                         keepalive=True, duration=30)
    c, s, _ = functools.partial(run_pair, stop_timeout=20.0)(srv, cli)
    n, req = c["sock_open"], c["http_req"]
    assert n == 20 and req > n * 10                          # keep-alive connections, many requests each
    assert c["http_2xx"] == req == s["http_get"] and c["http_err"] == 0
    assert c["sock_close"] == s["sock_close"] == n and c["sock_error"] == s["sock_error"] == 0
    assert c["pkts_tx"] == s["pkts_rx"] and s["pkts_tx"] == c["pkts_rx"]   # a ring loses nothing
    for side in (c, s):
        assert side["retrans_syn"] == side["retrans_fin"] == side["retrans_push"] == 0
    # the client's frames: SYN, the handshake's ACK riding on the first request, every request,
    # its FIN and the ACK of the server's FIN (a close crossing the server's may take one more
    # ACK a connection); without disable_ack, a pure ACK at the end of the loop pass for each
    # response whose next request is not due in that pass (one that is, carries the ACK: on a
    # loaded machine, where the client often sees a response after its next grid point, that is
    # many of them), so more than disable_ack's at most one a connection
    pure = c["pkts_tx"] - c["syn_tx"] - req - c["fin_tx"] - s["fin_tx"]
    print(f"disable_ack {disable_ack}: {req} requests, {pure} pure ACKs")
    if disable_ack:
        assert 0 <= pure <= n, (pure, req)
    else:
        assert n < pure <= req + n, (pure, req)
    no_leaks()
