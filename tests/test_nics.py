"""perfkit nics: network devices from sysfs (a faked tree, and this machine's own)."""
import json
import os
import shutil

import pytest

from perfkit import nics


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def _netdev(sysfs, devdir, name, *, ifindex, iflink=None, operstate="up", speed=None, mac="02:00:00:00:00:01",
            type_=1, extra=()):
    base = os.path.join(devdir, "net", name)
    os.makedirs(base)
    for k, v in {"ifindex": ifindex, "iflink": iflink if iflink is not None else ifindex,
                 "operstate": operstate, "address": mac, "type": type_,
                 "uevent": f"INTERFACE={name}\nIFINDEX={ifindex}"}.items():
        _write(os.path.join(base, k), str(v))
    if speed is not None:
        _write(os.path.join(base, "speed"), str(speed))
    for sub in extra:
        os.makedirs(os.path.join(base, sub))
    os.makedirs(os.path.join(sysfs, "class", "net"), exist_ok=True)
    os.symlink(os.path.relpath(base, os.path.join(sysfs, "class", "net")), os.path.join(sysfs, "class", "net", name))
    if os.path.basename(devdir).count(":") == 2:   # a PCI function: the interface's device link
        os.symlink(os.path.relpath(devdir, base), os.path.join(base, "device"))


def _pci(sysfs, addr, *, vendor, device, driver, numa=-1, cls="0x020000"):
    devdir = os.path.join(sysfs, "devices", "pci0000:00", addr)
    os.makedirs(devdir)
    for k, v in {"vendor": vendor, "device": device, "class": cls, "numa_node": numa}.items():
        _write(os.path.join(devdir, k), str(v))
    bus = os.path.join(sysfs, "bus", "pci", "devices")
    os.makedirs(bus, exist_ok=True)
    os.symlink(os.path.relpath(devdir, bus), os.path.join(bus, addr))
    if driver:
        drv = os.path.join(sysfs, "bus", "pci", "drivers", driver)
        os.makedirs(drv, exist_ok=True)
        os.symlink(os.path.relpath(drv, devdir), os.path.join(devdir, "driver"))
    return devdir


def fake_sysfs(root, vfio_dev=True):
    """A host with a NIC on ixgbe (eth1), one on vfio-pci, a mlx5_core one (enp3s0f0), one
    with no driver, a host bridge (not a network device), a veth and lo. Returns (sysfs, dev)."""
    sysfs = str(root / "sys")
    _pci(sysfs, "0000:00:00.0", vendor="0x8086", device="0x1237", driver=None, cls="0x060000")
    d = _pci(sysfs, "0000:01:00.0", vendor="0x8086", device="0x10fb", driver="ixgbe", numa=0)
    _netdev(sysfs, d, "eth1", ifindex=2, speed=10000, mac="a0:36:9f:00:00:01")
    _pci(sysfs, "0000:02:00.0", vendor="0x8086", device="0x1572", driver="vfio-pci", numa=1)
    d = _pci(sysfs, "0000:03:00.0", vendor="0x15b3", device="0x1017", driver="mlx5_core", numa=0)
    _netdev(sysfs, d, "enp3s0f0", ifindex=3, operstate="down", speed=-1, mac="b8:59:9f:00:00:02")
    _pci(sysfs, "0000:04:00.0", vendor="0x8086", device="0x1533", driver=None)
    virt = os.path.join(sysfs, "devices", "virtual", "net")
    os.makedirs(virt)
    _netdev(sysfs, virt, "veth0", ifindex=5, iflink=6, mac="02:00:00:00:00:05")
    _netdev(sysfs, virt, "lo", ifindex=1, operstate="unknown", mac="00:00:00:00:00:00", type_=772)
    os.makedirs(os.path.join(sysfs, "kernel", "iommu_groups", "7"))
    dev = str(root / "dev")
    os.makedirs(os.path.join(dev, "vfio") if vfio_dev else dev)
    return sysfs, dev


@pytest.fixture
def fake(tmp_path):
    return fake_sysfs(tmp_path)


def _rows(sysfs):
    return {n.pci or n.name: n for n in nics.scan(sysfs)}


def test_pci_addresses_normalise_to_the_four_digit_domain():
    assert nics.pci_address("01:00.0") == "0000:01:00.0"
    assert nics.pci_address("0000:3B:00.1") == "0000:3b:00.1"
    assert nics.pci_address(" 0001:af:1f.7 ") == "0001:af:1f.7"
    for bad in ("01:00", "1:00.0", "0000:01:00.8", "eth0", "0000:01:00.0,x=1"):
        assert nics.pci_address(bad) is None


def test_each_row_of_the_faked_host(fake):
    sysfs, _ = fake
    rows = _rows(sysfs)
    assert list(rows) == ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "lo", "veth0"]
    ixgbe = rows["0000:01:00.0"]
    assert (ixgbe.name, ixgbe.kind, ixgbe.vendor, ixgbe.device, ixgbe.driver, ixgbe.numa_node) == \
        ("eth1", "pci", "0x8086", "0x10fb", "ixgbe", 0)
    assert (ixgbe.link, ixgbe.speed_mbps, ixgbe.mac) == ("up", 10000, "a0:36:9f:00:00:01")
    assert ixgbe.dpdk == "bind" and ixgbe.bind == "dpdk-devbind.py -b vfio-pci 0000:01:00.0"
    assert ixgbe.how == ("bound to ixgbe (eth1): bind it with: dpdk-devbind.py -b vfio-pci 0000:01:00.0; "
                         "binding takes eth1 from the kernel")
    vfio = rows["0000:02:00.0"]
    assert (vfio.name, vfio.driver, vfio.numa_node, vfio.link, vfio.dpdk, vfio.bind) == \
        (None, "vfio-pci", 1, None, "ready", None)
    mlx = rows["0000:03:00.0"]
    assert (mlx.name, mlx.driver, mlx.link, mlx.speed_mbps, mlx.dpdk, mlx.bind) == \
        ("enp3s0f0", "mlx5_core", "down", None, "bifurcated", None)   # speed -1: the kernel does not know
    assert "bifurcated" in mlx.how and "no binding" in mlx.how
    none = rows["0000:04:00.0"]
    assert (none.driver, none.numa_node, none.dpdk) == (None, None, "bind")
    assert none.how == "no driver: bind it with: dpdk-devbind.py -b vfio-pci 0000:04:00.0"
    veth, lo = rows["veth0"], rows["lo"]
    assert (veth.pci, veth.kind, veth.link, veth.dpdk, veth.bind) == (None, "veth", "up", "vdev", None)
    assert "net_af_packet0,iface=veth0" in veth.how
    assert (lo.kind, lo.link, lo.dpdk) == ("loopback", "unknown", "vdev")


def test_the_environment_says_what_binding_needs(fake, tmp_path):
    sysfs, dev = fake
    env = nics.environment(sysfs, dev)
    assert env["vfio_pci"] is True and env["iommu_groups"] == 1 and env["dev_vfio"] is True
    assert env["uio_pci_generic"] is False and env["vfio_noiommu"] is False
    assert env["devbind"] == (shutil.which("dpdk-devbind.py") or shutil.which("dpdk-devbind"))
    bare = fake_sysfs(tmp_path / "bare", vfio_dev=False)
    os.rmdir(os.path.join(bare[0], "kernel", "iommu_groups", "7"))
    env = nics.environment(*bare)
    assert env["iommu_groups"] == 0 and env["dev_vfio"] is False


def test_the_table_has_a_line_per_device_and_the_notes(fake, monkeypatch):
    monkeypatch.setattr(nics.shutil, "which", lambda name: None)
    sysfs, dev = fake
    out = nics.text(nics.report(sysfs, dev)).splitlines()
    assert out[0].split() == ["DEVICE", "PCI", "KIND", "ID", "DRIVER", "NUMA", "LINK", "DPDK"]
    assert out[1].split() == ["eth1", "0000:01:00.0", "pci", "8086:10fb", "ixgbe", "0", "up", "10G", "bind:",
                              "dpdk-devbind.py", "-b", "vfio-pci", "0000:01:00.0"]
    assert out[2].split() == ["-", "0000:02:00.0", "pci", "8086:1572", "vfio-pci", "1", "-", "ready", "(vfio-pci)"]
    assert out[3].split() == ["enp3s0f0", "0000:03:00.0", "pci", "15b3:1017", "mlx5_core", "0", "down",
                              "ready", "(mlx5_core,", "bifurcated)"]
    assert out[4].split() == ["-", "0000:04:00.0", "pci", "8086:1533", "-", "-", "-", "bind:",
                              "dpdk-devbind.py", "-b", "vfio-pci", "0000:04:00.0"]
    assert out[5].split() == ["lo", "-", "loopback", "-", "-", "-", "unknown", "vdev:", "net_af_packet0,iface=lo"]
    assert out[6].split() == ["veth0", "-", "veth", "-", "-", "-", "up", "vdev:", "net_af_packet0,iface=veth0"]
    assert out[7] == ""
    assert out[8] == "dpdk-devbind.py: not installed (Debian: apt install dpdk)"
    assert out[9] == "vfio-pci: loaded; IOMMU groups: 1; /dev/vfio: present"
    assert out[10].startswith("perfkit binds nothing itself")
    # columns line up: every row's PCI column starts where the header's does
    col = out[0].index("PCI")
    assert all(line[col:col + 1] in ("0", "-") for line in out[1:7])


def test_the_json_is_the_report(fake):
    sysfs, dev = fake
    doc = json.loads(nics.to_json(nics.report(sysfs, dev)))
    assert [n["pci"] or n["name"] for n in doc["nics"]] == list(_rows(sysfs))
    assert doc["nics"][0]["bind"] == "dpdk-devbind.py -b vfio-pci 0000:01:00.0"
    assert set(doc["dpdk"]) == {"devbind", "vfio_pci", "uio_pci_generic", "iommu_groups", "vfio_noiommu", "dev_vfio"}


def test_a_missing_sysfs_is_no_devices(tmp_path):
    assert nics.scan(str(tmp_path / "none")) == []
    assert nics.text(nics.report(str(tmp_path / "none"), str(tmp_path))).splitlines()[0].startswith("DEVICE")


def test_this_machines_own_sysfs():
    rows = nics.scan()
    lo = [n for n in rows if n.name == "lo"]
    assert len(lo) == 1 and lo[0].kind == "loopback" and lo[0].pci is None and lo[0].dpdk == "vdev"
    for n in rows:
        assert n.dpdk in ("ready", "bifurcated", "bind", "vdev")
        assert (n.bind is not None) == (n.dpdk == "bind")
        if n.pci:
            assert nics.pci_address(n.pci) == n.pci
    text = nics.text(nics.report())
    assert "\nlo " in text and "dpdk-devbind.py" in text


def test_cli_nics_table_and_json(capsys):
    from perfkit.cli import main
    assert main(["nics"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DEVICE") and "\nlo " in out
    assert main(["nics", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(n["name"] == "lo" for n in doc["nics"])


# ------------------------------------------------------------------ PCI ports and bonds in DPDK specs

@pytest.mark.parametrize("dev, port", [
    ("0000:01:00.0", "0000:01:00.0"),
    ("01:00.1", "0000:01:00.1"),
    ("0000:3B:00.0,txq_inline=0", "0000:3b:00.0,txq_inline=0"),
    ("net_bonding0,mode=4,slave=81:10.0,slave=0000:81:10.1,xmit_policy=l34",
     "net_bonding0,mode=4,slave=0000:81:10.0,slave=0000:81:10.1,xmit_policy=l34"),
    ("net_bonding1,mode=1,slave=0000:01:00.0,slave=0000:01:00.1,primary=01:00.1",
     "net_bonding1,mode=1,slave=0000:01:00.0,slave=0000:01:00.1,primary=0000:01:00.1"),
    # dperf's own bond syntax: bondMODE:POLICY(PCI,...), POLICY 0..2 = l2, l23, l34
    ("bond4:2(0000:81:10.0,81:10.1)",
     "net_bonding_0000_81_10_0,mode=4,xmit_policy=l34,slave=0000:81:10.0,slave=0000:81:10.1"),
    ("bond0:0(0000:02:00.0)", "net_bonding_0000_02_00_0,mode=0,xmit_policy=l2,slave=0000:02:00.0"),
])
def test_pci_ports_and_bonds_are_taken_and_normalised(dev, port):
    from perfkit.spec import check_dpdk_port
    assert check_dpdk_port(dev) == port
    assert check_dpdk_port(port) == port       # checking again changes nothing


@pytest.mark.parametrize("dev, why", [
    ("bond5:2(0000:81:10.0)", r"MODE 0-4, POLICY 0-2"),
    ("bond4:3(0000:81:10.0)", r"MODE 0-4, POLICY 0-2"),
    ("bond4:2(eth0,eth1)", r"the bond's members are PCI addresses"),
    ("net_bonding0,mode=4", r"a bond needs mode=N and a slave=PCI for each member"),
    ("net_bonding0,slave=01:00.0", r"a bond needs mode=N"),
    ("net_bonding0,mode=9,slave=01:00.0", r"mode=9: a bonding mode is 0..6"),
    ("net_bonding0,mode=1,slave=eth0", r"slave=eth0: a bond member is a PCI address"),
    ("net_bonding0,mode=1,slave=01:00.0,xmit_policy=l5", r"xmit_policy=l5: one of l2, l23, l34"),
    ("net_bonding0,mode=1,slave=01:00.0,iface=x", r"'iface=x' is not a bonding argument"),
    ("0000:01:00.0,bad", r"'bad' is not a key=value device argument"),
    ("0000:01:00.8", r"is not a port: .* a NIC's PCI address \(0000:01:00.0\)"),
])
def test_bad_pci_ports_and_bonds_say_why(dev, why):
    from perfkit.spec import check_dpdk_port
    with pytest.raises(ValueError, match=why):
        check_dpdk_port(dev)


def test_the_pci_devices_a_port_uses():
    from perfkit.spec import pci_port_addresses
    assert pci_port_addresses("0000:01:00.0,txq_inline=0") == ["0000:01:00.0"]
    assert pci_port_addresses("net_bonding0,mode=4,slave=0000:81:10.0,slave=0000:81:10.1") == \
        ["0000:81:10.0", "0000:81:10.1"]
    assert pci_port_addresses("ring:a:0") == [] and pci_port_addresses("net_memif0,role=server") == []


def test_specs_take_pci_ports():
    from perfkit.spec import DpdkFlows, DpdkReflect
    spec = DpdkFlows(port="01:00.0", peer="bond4:2(02:00.0,02:00.1)", rate="1Mpps")
    assert spec.port == "0000:01:00.0"
    assert spec.peer == "net_bonding_0000_02_00_0,mode=4,xmit_policy=l34,slave=0000:02:00.0,slave=0000:02:00.1"
    assert DpdkReflect(port="0000:01:00.1").port == "0000:01:00.1"


# ------------------------------------------------------------------ EAL with PCI ports

def test_eal_args_name_each_pci_device_or_say_no_pci():
    from perfkit.engines import dpdk
    from perfkit.engines.dpdk import EalOptions, pci_of
    opts = EalOptions(hugepages=False)
    none = opts.args()
    assert "--no-pci" in none and "-a" not in none
    assert opts.args(()) == none
    two = opts.args(("0000:01:00.0", "0000:02:00.0"))
    assert "--no-pci" not in two
    i = two.index("-a")
    assert two[i:i + 4] == ["-a", "0000:01:00.0", "-a", "0000:02:00.0"]
    assert [a for a in two if a not in ("-a", "0000:01:00.0", "0000:02:00.0")] == \
        [a for a in none if a != "--no-pci"]          # everything else as without PCI
    assert pci_of(["ring:a:0", "net_memif0,role=server"]) == ()
    ports = ["0000:02:00.0,txq_inline=0", "net_bonding0,mode=4,slave=0000:01:00.0,slave=0000:02:00.0"]
    assert dpdk._allow(ports, pci_of(ports)) == ("0000:01:00.0", "0000:02:00.0,txq_inline=0")
    assert pci_of(["0000:02:00.0,txq_inline=0", "net_bonding0,mode=4,slave=0000:01:00.0,slave=0000:02:00.0"]) == \
        ("0000:01:00.0", "0000:02:00.0")


@pytest.mark.parametrize("addr, line", [
    ("0000:09:00.0", "0000:09:00.0: no such PCI device on this host"),
    ("01:00.0", "0000:01:00.0: bound to ixgbe (eth1); bind it with: dpdk-devbind.py -b vfio-pci 0000:01:00.0"),
    ("0000:04:00.0", "0000:04:00.0: bound to no driver; bind it with: dpdk-devbind.py -b vfio-pci 0000:04:00.0"),
    ("0000:00:00.0", "0000:00:00.0: not a network device (PCI class 0x060000)"),
])
def test_each_pci_problem_is_one_line_before_eal(fake, addr, line):
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    sysfs, dev = fake
    assert nics.dpdk_problem(addr, sysfs, dev) == line
    with pytest.raises(EngineError) as e:
        dpdk.check_pci([nics.pci_address(addr)], sysfs, dev)
    assert str(e.value) == line


def test_devices_dpdk_takes_pass_and_vfio_needs_dev_vfio(fake, tmp_path):
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    sysfs, dev = fake
    dpdk.check_pci(["0000:02:00.0", "0000:03:00.0"], sysfs, dev)      # vfio-pci with /dev/vfio; mlx5_core
    sysfs2, dev2 = fake_sysfs(tmp_path / "novfio", vfio_dev=False)
    assert nics.dpdk_problem("0000:03:00.0", sysfs2, dev2) is None     # bifurcated: no vfio needed
    with pytest.raises(EngineError) as e:
        dpdk.check_pci(["0000:02:00.0"], sysfs2, dev2)
    assert str(e.value) == (f"0000:02:00.0: bound to vfio-pci but {dev2}/vfio is missing "
                            "(load vfio-pci with the IOMMU on, or vfio's no-IOMMU mode)")
    with pytest.raises(EngineError) as e:     # every problem, on one line
        dpdk.check_pci(["0000:01:00.0", "0000:09:00.0"], sysfs, dev)
    assert str(e.value) == ("0000:01:00.0: bound to ixgbe (eth1); bind it with: dpdk-devbind.py -b vfio-pci "
                            "0000:01:00.0; 0000:09:00.0: no such PCI device on this host")


def test_eal_checks_the_injected_sysfs_before_it_starts(fake, monkeypatch):
    """eal() asks sysfs (dpdk.SYSFS, dpdk.DEV) before rte_eal_init; EAL up or not, the line is the same."""
    pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    sysfs, dev = fake
    monkeypatch.setattr(dpdk, "SYSFS", sysfs)
    monkeypatch.setattr(dpdk, "DEV", dev)
    with pytest.raises(EngineError) as e:
        dpdk.eal(["0000:01:00.0,txq_inline=0"])
    assert str(e.value) == "0000:01:00.0: bound to ixgbe (eth1); bind it with: dpdk-devbind.py -b vfio-pci 0000:01:00.0"


RUN_WITH_ABSENT_PCI = r"""
import sys
import perfkit
from perfkit import _dpdk
from perfkit.engines import dpdk
from perfkit.errors import EngineError
from perfkit.spec import DpdkFlows
dpdk.configure(hugepages=False)
absent = sys.argv[1]
for _ in range(2):   # before EAL is up, then with EAL up (--no-pci): the same line
    try:
        perfkit.Run(DpdkFlows(port=absent, peer="ring:n:1", rate="10kpps", duration="0.3s"), engine="dpdk").start()
    except EngineError as e:
        print("ERR", e, flush=True)
    print("STATE", _dpdk.eal_state(), flush=True)
    run = perfkit.Run(DpdkFlows(port="ring:n:0", peer="ring:n:1", rate="10kpps", duration="0.3s"),
                      engine="dpdk").run()
    print("RUN", run.error, run.summary["pkts_rx"] > 0, flush=True)
print("ARGS", " ".join(dpdk.detail()["eal_args"]))
dpdk.SYSFS, dpdk.DEV = sys.argv[2], sys.argv[3]   # a device DPDK could take, but EAL is up without it
try:
    dpdk.eal(["0000:02:00.0"])
except EngineError as e:
    print("UP", e, flush=True)
"""


def test_a_run_on_an_absent_pci_device_fails_clearly_and_eal_stays_usable(fake):
    """On this machine (no NIC DPDK may take): the PCI device is absent, the run fails before
    EAL starts with one line, and a net_ring run in the same process works after it."""
    pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
    import subprocess
    import sys
    absent = "0000:fe:1f.7"
    assert not os.path.exists(f"/sys/bus/pci/devices/{absent}")
    sysfs, dev = fake
    out = subprocess.run([sys.executable, "-P", "-c", RUN_WITH_ABSENT_PCI, "fe:1f.7", sysfs, dev],
                         capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    if "RUN" not in out.stdout and "EAL" in out.stderr:
        pytest.skip(f"DPDK EAL does not start here: {out.stderr[-500:]}")
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert lines[0] == f"ERR {absent}: no such PCI device on this host"
    assert lines[1] == "STATE down"      # EAL was never tried: nothing poisoned
    assert lines[2] == "RUN None True"
    assert lines[3:6] == [f"ERR {absent}: no such PCI device on this host", "STATE up", "RUN None True"]
    assert "--no-pci" in lines[6].split() and "-a" not in lines[6].split()
    assert lines[7] == ("UP 0000:02:00.0: DPDK EAL is already up in this process without it (--no-pci): EAL "
                        "takes its PCI devices when it starts; restart the kernel/process with this spec first")
