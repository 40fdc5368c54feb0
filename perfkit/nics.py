"""The network devices of this host, read from sysfs, and whether DPDK can take each.

    perfkit nics            # a table
    perfkit nics --json     # the same for machines
    perfkit.nics.report()   # {"nics": [...], "dpdk": {...}}

Every PCI network device (class 0x02) and every kernel interface (/sys/class/net)
is one row: PCI address, vendor and device ids, driver, NUMA node, link state and
speed where the kernel says, and the interface name while a kernel driver holds it.
DPDK takes a PCI device bound to vfio-pci, uio_pci_generic or igb_uio, or one on
a bifurcated driver (mlx5_core: the kernel keeps its interface, DPDK's mlx5 PMD
works beside it); for any other the row gives the command that binds it. Nothing
is bound here: binding takes the interface away from the kernel, so it is the
user's to run. Interfaces that are not PCI (veth, lo, virtio on other buses...)
reach DPDK only as vdevs (net_af_packet0,iface=NAME).

The sysfs root is a parameter (tests fake a tree); /dev likewise, for /dev/vfio.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict, dataclass


PCI_ADDR = re.compile(r"([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def pci_address(text: str) -> str | None:
    """0000:01:00.0 or 01:00.0 -> 0000:01:00.0 (the form DPDK names the port by); None if not one."""
    text = text.strip()
    if not PCI_ADDR.fullmatch(text):
        return None
    text = text.lower()
    return text if text.count(":") == 2 else "0000:" + text


def pci_port_addresses(dev: str) -> list[str]:
    """The PCI devices a checked port string uses: its own address, or a bond's members."""
    name, *args = str(dev).split(",")
    if pci_address(name):
        return [name]
    if name.startswith("net_bonding"):
        return [a.split("=", 1)[1] for a in args if a.startswith("slave=")]
    return []

KERNEL_BYPASS = ("vfio-pci", "uio_pci_generic", "igb_uio")   # drivers DPDK's PCI PMDs run on
BIFURCATED = ("mlx5_core", "mlx4_core")                        # the kernel keeps them; DPDK works beside
BIND_DRIVER = "vfio-pci"
DEVBIND = "dpdk-devbind.py"
_PCI = re.compile(r"(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
ARPHRD_LOOPBACK = 772


def pci_address(text) -> str | None:
    """0000:01:00.0 or 01:00.0 -> '0000:01:00.0' (lower case); None if it is not one."""
    m = _PCI.fullmatch(str(text).strip())
    if not m:
        return None
    dom, bus, slot, fn = m.groups()
    return f"{(dom or '0000').lower()}:{bus.lower()}:{slot.lower()}.{fn}"


def bind_command(addr: str) -> str:
    return f"{DEVBIND} -b {BIND_DRIVER} {addr}"


@dataclass
class Nic:
    """One network device. dpdk: 'ready' (DPDK takes it as it is), 'bifurcated'
    (ready, the kernel keeps its interface), 'bind' (a kernel driver or none holds
    it: run `bind`), 'vdev' (not PCI: DPDK reaches it as net_af_packet0,iface=NAME)."""
    name: str | None            # the kernel interface(s), comma separated; None: no kernel driver has one
    pci: str | None             # 0000:01:00.0, None for devices that are not PCI
    kind: str                   # pci, loopback, veth, bridge, bond, tun, vlan, virtio (BUS), virtual, ...
    vendor: str | None = None   # 0x8086
    device: str | None = None   # 0x10fb
    driver: str | None = None   # the PCI function's driver, else the interface's
    numa_node: int | None = None
    link: str | None = None     # the kernel's operstate: up, down, unknown, ...
    speed_mbps: int | None = None
    mac: str | None = None
    dpdk: str = "vdev"
    how: str = ""               # one line: what DPDK can do with it, or what to do
    bind: str | None = None     # the command that binds it for DPDK (never run here)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):   # sysfs answers EINVAL for a speed it does not know
        return None


def _int(text, base: int = 10) -> int | None:
    try:
        return int(text, base)
    except (TypeError, ValueError):
        return None


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def _pci_of(real: str) -> str | None:
    """The PCI function a device path lies under (the nearest one), or None."""
    for part in reversed(real.split(os.sep)):
        if _PCI.fullmatch(part) and len(part) == 12:
            return part.lower()
    return None


def _kind(base: str) -> str:
    """What a non-PCI interface is, from what sysfs shows of it."""
    if _int(_read(os.path.join(base, "type"))) == ARPHRD_LOOPBACK:
        return "loopback"
    for sub, kind in (("bridge", "bridge"), ("bonding", "bond"), ("tun_flags", "tun")):
        if os.path.exists(os.path.join(base, sub)):
            return kind
    uevent = _read(os.path.join(base, "uevent")) or ""
    devtype = next((ln.split("=", 1)[1] for ln in uevent.splitlines() if ln.startswith("DEVTYPE=")), None)
    if devtype:
        return devtype
    if os.path.exists(os.path.join(base, "device")):
        bus = _link_name(os.path.join(base, "device", "subsystem")) or "?"
        return f"{bus} device" if bus != "virtio" else "virtio (not PCI)"
    ifindex, iflink = _int(_read(os.path.join(base, "ifindex"))), _int(_read(os.path.join(base, "iflink")))
    if ifindex is not None and iflink not in (None, 0, ifindex):
        return "veth"   # a virtual interface whose link is another interface: a veth pair's end
    return "virtual"


def _speed(base: str) -> int | None:
    s = _int(_read(os.path.join(base, "speed")))
    return s if s is not None and s > 0 else None


def _interfaces(sysfs: str) -> dict[str, tuple[str, str | None]]:
    """name -> (its sysfs directory, the PCI function it lies under or None)."""
    out = {}
    root = os.path.join(sysfs, "class", "net")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for name in names:
        base = os.path.join(root, name)
        out[name] = (base, _pci_of(os.path.realpath(base)))
    return out


def _pci_row(sysfs: str, addr: str, ifaces: dict) -> Nic:
    base = os.path.join(sysfs, "bus", "pci", "devices", addr)
    names = [n for n, (_, pci) in ifaces.items() if pci == addr]
    driver = _link_name(os.path.join(base, "driver"))
    numa = _int(_read(os.path.join(base, "numa_node")))
    nic = Nic(name=",".join(names) or None, pci=addr, kind="pci",
              vendor=_read(os.path.join(base, "vendor")), device=_read(os.path.join(base, "device")),
              driver=driver, numa_node=numa if numa is not None and numa >= 0 else None)
    if names:
        first = ifaces[names[0]][0]
        nic.link = _read(os.path.join(first, "operstate"))
        nic.speed_mbps = _speed(first)
        nic.mac = _read(os.path.join(first, "address"))
    if driver in KERNEL_BYPASS:
        nic.dpdk, nic.how = "ready", f"bound to {driver}: DPDK takes it (port {addr})"
    elif driver in BIFURCATED:
        nic.dpdk = "bifurcated"
        nic.how = (f"{driver} is bifurcated: DPDK's PMD works beside the kernel (port {addr}; "
                   "needs rdma-core), no binding")
    else:
        nic.dpdk, nic.bind = "bind", bind_command(addr)
        held = f"bound to {driver}" + (f" ({nic.name})" if nic.name else "") if driver else "no driver"
        up = f"; binding takes {nic.name} from the kernel" if nic.name and nic.link == "up" else ""
        nic.how = f"{held}: bind it with: {nic.bind}{up}"
    return nic


def _pci_network(sysfs: str, addr: str) -> bool:
    cls = _read(os.path.join(sysfs, "bus", "pci", "devices", addr, "class")) or ""
    return cls.lower().startswith("0x02")


def scan(sysfs: str = "/sys") -> list[Nic]:
    """Every network device: PCI ones (by address), then the other interfaces (by name)."""
    ifaces = _interfaces(sysfs)
    try:
        pcis = sorted(a.lower() for a in os.listdir(os.path.join(sysfs, "bus", "pci", "devices")))
    except OSError:
        pcis = []
    under = {pci for _, pci in ifaces.values() if pci}
    rows = [_pci_row(sysfs, a, ifaces) for a in pcis if a in under or _pci_network(sysfs, a)]
    for name, (base, pci) in ifaces.items():
        if pci and pci in pcis:
            continue
        kind = _kind(base)
        driver = _link_name(os.path.join(base, "device", "driver"))
        nic = Nic(name=name, pci=None, kind=kind, driver=driver, link=_read(os.path.join(base, "operstate")),
                  speed_mbps=_speed(base), mac=_read(os.path.join(base, "address")))
        nic.how = (f"not PCI ({kind}): DPDK reaches it only as a vdev, net_af_packet0,iface={name} "
                   "(or net_af_xdp0,iface=...)")
        rows.append(nic)
    return rows


def environment(sysfs: str = "/sys", dev: str = "/dev") -> dict:
    """What binding for DPDK needs here: dpdk-devbind.py, the vfio-pci driver, IOMMU groups, /dev/vfio."""
    devbind = shutil.which(DEVBIND) or shutil.which("dpdk-devbind")
    try:
        groups = len(os.listdir(os.path.join(sysfs, "kernel", "iommu_groups")))
    except OSError:
        groups = 0
    noiommu = (_read(os.path.join(sysfs, "module", "vfio", "parameters", "enable_unsafe_noiommu_mode"))
               or "").upper() in ("Y", "1")
    return {"devbind": devbind,
            "vfio_pci": os.path.isdir(os.path.join(sysfs, "bus", "pci", "drivers", "vfio-pci")),
            "uio_pci_generic": os.path.isdir(os.path.join(sysfs, "bus", "pci", "drivers", "uio_pci_generic")),
            "iommu_groups": groups, "vfio_noiommu": noiommu,
            "dev_vfio": os.path.isdir(os.path.join(dev, "vfio"))}


def report(sysfs: str = "/sys", dev: str = "/dev") -> dict:
    return {"nics": [asdict(n) for n in scan(sysfs)], "dpdk": environment(sysfs, dev)}


def _notes(env: dict) -> list[str]:
    out = [f"{DEVBIND}: " + (env["devbind"] or "not installed (Debian: apt install dpdk)")]
    vfio = "vfio-pci: " + ("loaded" if env["vfio_pci"] else "not loaded (modprobe vfio-pci)")
    if env["iommu_groups"]:
        vfio += f"; IOMMU groups: {env['iommu_groups']}"
    elif env["vfio_noiommu"]:
        vfio += "; no IOMMU groups, vfio's no-IOMMU mode is on (unsafe: no DMA isolation)"
    else:
        vfio += ("; no IOMMU groups (turn the IOMMU on: intel_iommu=on or amd_iommu=on, iommu=pt; "
                 "or uio_pci_generic)")
    vfio += "; /dev/vfio: " + ("present" if env["dev_vfio"] else "missing")
    return [out[0], vfio, "perfkit binds nothing itself: run a bind command yourself, knowing the "
            "interface leaves the kernel."]


def _speed_text(mbps: int | None) -> str:
    if mbps is None:
        return ""
    return f"{mbps // 1000}G" if mbps >= 1000 and mbps % 1000 == 0 else f"{mbps}M"


def text(rep: dict) -> str:
    """The report as a table, then what binding needs here."""
    head = ("DEVICE", "PCI", "KIND", "ID", "DRIVER", "NUMA", "LINK", "DPDK")
    rows = []
    for n in rep["nics"]:
        ident = f"{n['vendor'][2:]}:{n['device'][2:]}" if n["vendor"] and n["device"] else "-"
        link = " ".join(x for x in (n["link"] or "", _speed_text(n["speed_mbps"])) if x) or "-"
        dpdk = {"ready": f"ready ({n['driver']})", "bifurcated": f"ready ({n['driver']}, bifurcated)",
                "bind": f"bind: {n['bind']}", "vdev": f"vdev: net_af_packet0,iface={n['name']}"}[n["dpdk"]]
        rows.append((n["name"] or "-", n["pci"] or "-", n["kind"], ident, n["driver"] or "-",
                     "-" if n["numa_node"] is None else str(n["numa_node"]), link, dpdk))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    return "\n".join(lines + [""] + _notes(rep["dpdk"]))


def to_json(rep: dict) -> str:
    return json.dumps(rep, indent=2)


def dpdk_problem(addr: str, sysfs: str = "/sys", dev: str = "/dev") -> str | None:
    """Why DPDK could not take the PCI device at addr, in one line; None if it can.
    Asked before EAL starts: a failed rte_eal_init cannot be retried in the process."""
    addr = pci_address(addr) or str(addr)
    base = os.path.join(sysfs, "bus", "pci", "devices", addr)
    if not os.path.exists(base):
        return f"{addr}: no such PCI device on this host"
    if not _pci_network(sysfs, addr):
        return f"{addr}: not a network device (PCI class {_read(os.path.join(base, 'class')) or '?'})"
    driver = _link_name(os.path.join(base, "driver"))
    if driver == "vfio-pci" and not os.path.isdir(os.path.join(dev, "vfio")):
        return (f"{addr}: bound to vfio-pci but {os.path.join(dev, 'vfio')} is missing "
                "(load vfio-pci with the IOMMU on, or vfio's no-IOMMU mode)")
    if driver in KERNEL_BYPASS or driver in BIFURCATED:
        return None
    if driver is None:
        return f"{addr}: bound to no driver; bind it with: {bind_command(addr)}"
    names = [n for n, (_, pci) in _interfaces(sysfs).items() if pci == addr]
    return f"{addr}: bound to {driver}" + (f" ({','.join(names)})" if names else "") + \
        f"; bind it with: {bind_command(addr)}"
