"""Receive on one port, send on another (issue 30, BiTester's -r/-t): a reverse reflector whose
reflected frames leave by its tx_port, a generator whose frames come back on its rx_port.
Sent = received + lost, exactly; the frames really took the other ports (the NIC counters of the
ports they did not take stay at 0)."""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import perfkit
from perfkit.spec import DpdkFlows, DpdkReflect
from perfkit.kinds.dpdk_udp import ports_and_workers

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402

A_IP, B_IP = "198.18.0.1", "198.18.0.2"
GEN_MAC = "02:00:00:00:31:01"     # not a real port's: the reflector's next hop, given


def test_the_spec_checks_and_the_plan():
    with pytest.raises(ValueError, match="^rx_port: only in mode reverse"):
        DpdkFlows(port="ring:x:0", rx_port="ring:y:1")
    with pytest.raises(ValueError, match="^rx_port: only in mode reverse"):
        DpdkFlows(port="ring:x:0", peer="ring:x:1", mode="reverse", rx_port="ring:y:1")
    with pytest.raises(ValueError, match="^rx_port: 'ring:x:0' is the port itself"):
        DpdkFlows(port="ring:x:0", mode="reverse", rx_port="ring:x:0")
    with pytest.raises(ValueError, match="^tx_port: only mode reverse"):
        DpdkReflect(port="ring:x:1", mode="rxonly", tx_port="ring:y:0")
    with pytest.raises(ValueError, match="^dst_mac: only mode forward uses it .* or reverse with tx_port"):
        DpdkReflect(port="ring:x:1", dst_mac=GEN_MAC)
    ports, workers = ports_and_workers(DpdkFlows(port="ring:x:0", mode="reverse", rx_port="ring:y:1", cores=2,
                                                 flows=4))
    assert [p for p, _ in ports] == ["ring:x:0", "ring:y:1"]
    assert [(w["role"], w["port"], w.get("peer"), w.get("peer_back")) for w in workers] == [
        ("dpdk_recv", 1, None, None), ("dpdk_recv", 1, None, None), ("dpdk_send", 0, 0, 1), ("dpdk_send", 0, 1, 1)]
    ports, workers = ports_and_workers(DpdkReflect(port="ring:x:1", tx_port="ring:y:0", dst_mac=GEN_MAC))
    assert [p for p, _ in ports] == ["ring:x:1", "ring:y:0"] and workers[0]["out"] == 1


@pytest.mark.parametrize("cores", [1, 2])
def test_reflector_sends_by_its_tx_port_generator_receives_on_its_rx_port(eal, cores):
    # ring:rt1 carries a -> b (generator port 0 -> reflector port), ring:rt2 b -> a (reflector tx
    # port -> generator rx port); nothing goes back on the port a frame came in by
    refl = perfkit.Run(DpdkReflect(port=f"ring:rt1{cores}:1", tx_port=f"ring:rt2{cores}:0", mode="reverse", ip=B_IP,
                                   dst_mac=GEN_MAC, cores=cores, duration="20s"), engine="dpdk", interval=0.1).start()
    try:
        deadline = time.monotonic() + 10
        while not refl.rows and time.monotonic() < deadline:   # its workers poll before the first frame
            time.sleep(0.01)
        spec = DpdkFlows(port=f"ring:rt1{cores}:0", rx_port=f"ring:rt2{cores}:1", mode="reverse", ip=A_IP,
                         peer_ip=B_IP, dst_mac="02:00:00:00:31:02", rate="20kpps", flows=4, cores=cores,
                         duration="0.5s")
        run = perfkit.Run(spec, engine="dpdk").run()
    finally:
        refl.stop()
        refl.wait(30)
    s, r = run.summary, refl.summary
    assert run.error is None and refl.error is None
    sent = s["a_to_b_sent"]
    assert abs(sent + s["drop_tx"] - 10_000) <= cores and s["pkts_tx"] == sent   # a busy host: a full ring drops
    assert r["pkts_rx"] == sent and r["pkts_tx"] == sent                       # the reflector got and sent all
    assert s["b_to_a_received"] == r["pkts_tx"] and s["b_to_a_received"] + s["lost"] == sent
    assert s["lost"] == s["dup"] == s["reorder"] == 0 and s["lat_count"] == sent   # round trips, at rx_port
    # the NICs: the generator's port sent them all and got none back; its rx port got them all
    assert s["a_to_b_nic_tx"] == sent and s["b_to_a_nic_rx"] == sent
    last = refl.rows[-1]
    assert last["nic_ipackets"] == sent and last["nic_opackets"] == 0       # the reflector's rx port sent none
    run_rows = run.frame
    assert run_rows["nic_ipackets"][-1] == sent                               # only the rx port received
    assert dpdk.resources()["ports_open"] == 0


@pytest.fixture()
def socks():
    d = tempfile.mkdtemp(prefix="pkrxtx")
    yield os.path.join(d, "a.sock"), os.path.join(d, "b.sock")
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def test_over_two_memif_links_between_two_processes(eal, socks):
    # the CLI's reflector in another process receives on one memif link and sends by a second one;
    # this process's generator sends on the first and receives on the second
    a_sock, b_sock = socks
    mac = "02:00:00:00:31:03"
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "perfkit", "reflect", "--port", f"net_memif0,role=server,socket={a_sock},mac={mac}",
         "--tx-port", f"net_memif1,role=server,socket={b_sock}", "--mode", "reverse", "--ip", B_IP,
         "--dst-mac", GEN_MAC, "--duration", "15s", "--interval", "0.1s", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 30)
        assert ready, "the reflector printed no row in 30 s"
        assert server.stdout.readline().startswith("{"), server.poll()
        spec = DpdkFlows(port=f"net_memif0,role=client,socket={a_sock}", mode="reverse", ip=A_IP, peer_ip=B_IP,
                         rx_port=f"net_memif1,role=client,socket={b_sock},mac={GEN_MAC}", dst_mac=mac,
                         rate="20kpps", flows=5, duration="1s")
        run = perfkit.Run(spec, engine="dpdk").run()
    finally:
        server.send_signal(signal.SIGINT)   # Ctrl-C: the reflector stops, then prints its summary
        out, err = server.communicate(timeout=30)
    assert run.error is None, (run.error, err[-3000:])
    far = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")][-1]["summary"]
    s = run.summary
    # a busy host may leave frames in a memif ring when a side closes: identities, not a clean link
    assert s["a_to_b_sent"] == 20_000 >= far["pkts_rx"] and far["pkts_rx"] == far["pkts_tx"] + far["drop_tx"]
    assert s["b_to_a_received"] + s["lost"] == s["a_to_b_sent"] and s["b_to_a_received"] <= far["pkts_tx"]
    assert s["b_to_a_received"] > 0 and s["lost"] >= far["drop_tx"], (s, far)   # what its full tx ring dropped is lost
    assert s["b_to_a_nic_rx"] == s["b_to_a_received"] and s["lat_count"] == s["b_to_a_received"]
    assert dpdk.resources()["ports_open"] == 0
