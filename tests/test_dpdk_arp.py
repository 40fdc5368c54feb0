"""When a generator's ARP for its destination gets no answer (issue 5: "it says which address
did not answer on which port and what to check", dperf's most common support question):
the run's summary and the CLI say so, naming the address, the port and what to check."""
import subprocess
import sys

import pytest

import perfkit
from perfkit.spec import DpdkFlows, DpdkReflect

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")


def test_an_unanswered_arp_names_the_address_the_port_and_what_to_check(eal):
    # nobody on ring:na:1: the request goes into the ring and nothing answers
    run = perfkit.run(DpdkFlows(port="ring:na:0", peer_ip="198.18.0.9", rate="1kpps", duration="0.3s"))
    s = run.summary
    assert s["pkts_tx"] == pytest.approx(300, abs=3)         # it still sent, to broadcast
    (w,) = s["warnings"]
    assert w.startswith("port ring:na:0: nobody answered ARP for 198.18.0.9 (asked from 198.18.0.1")
    assert "broadcast" in w and "--dst-mac" in w and "perfkit reflect --ip 198.18.0.9" in w


def test_an_answered_arp_warns_of_nothing(eal):
    far = perfkit.Run(DpdkReflect(mode="rxonly", port="ring:nb:1", ip="198.18.0.2", duration="20s"),
                      interval=0.25).start()
    try:
        run = perfkit.run(DpdkFlows(port="ring:nb:0", peer_ip="198.18.0.2", rate="1kpps", duration="0.3s",
                                    cores=1))
    finally:
        far.stop()
        far.wait(30)
    assert "warnings" not in run.summary and far.rows[-1]["arp_rx"] >= 1
    assert far.rows[-1]["udp_rx"] == run.summary["pkts_tx"]
    # a peer port in this process, or a MAC given: nothing is asked, nothing to warn about
    run = perfkit.run(DpdkFlows(port="ring:nc:0", dst_mac="02:00:00:00:00:09", rate="1kpps", duration="0.2s"))
    assert "warnings" not in run.summary


def test_the_cli_prints_the_warning_on_stderr():
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:nd:0", "--peer-ip",
                          "198.18.0.9", "--rate", "1kpps", "-t", "0.2s"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    warn = [ln for ln in out.stderr.splitlines() if ln.startswith("perfkit: warning:")]
    assert len(warn) == 1 and "port ring:nd:0: nobody answered ARP for 198.18.0.9" in warn[0]
