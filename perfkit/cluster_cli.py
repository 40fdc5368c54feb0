"""perfkit cluster up|status|down: ipyparallel clusters to run one load from many hosts (perfkit.cluster)."""
from __future__ import annotations

import json
import sys

from perfkit import cluster


def add_parser(sub) -> None:
    """perfkit cluster's parser in sub (argparse subparsers)."""
    p = sub.add_parser("cluster", help="engines on many hosts (lab hosts, or local) for one load (ipyparallel)")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a controller and engines; they stay up until perfkit cluster down")
    up.add_argument("--lab", help="one engine in each host of this lab (perfkit lab up), inside its namespace")
    up.add_argument("--hosts", help="which hosts of the lab: h1,h2,h3 (default every host)")
    up.add_argument("-n", "--engines", type=int, help="without --lab: this many local engines (default 3)")
    up.add_argument("--name", help="the cluster's name (default the lab's name, or local)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds the engines may take to register (default 60)")
    st = csub.add_parser("status", help="the clusters that are up, and their engines")
    st.add_argument("--json", action="store_true", help="as JSON")
    dn = csub.add_parser("down", help="stop a cluster's engines and controller")
    dn.add_argument("name", nargs="?", help="which cluster (default: the only one up)")


def status_text(states: list[dict]) -> str:
    if not states:
        return "no perfkit clusters"
    lines = []
    for st in states:
        ctl = "up" if st["controller_alive"] else "controller gone"
        lines.append(f"{st['name']}: {ctl}, {len(st['engines'])} engines"
                     + (f" in lab {st['lab']}" if st.get("lab") else "") + f"  ({st['client_file']})")
        for e in st["engines"]:
            where = f"netns {e['netns']}" if e.get("netns") else "local"
            lines.append(f"  {e['host']:<8} pid {e['pid']:<8} {where:<20} {'alive' if e['alive'] else 'gone'}")
    return "\n".join(lines)


def run(a) -> int:
    """perfkit cluster's command: 0 done, 1 the cluster failed, 2 bad input."""
    if a.cluster_command == "up":
        try:
            c = cluster.Cluster.start(n=a.engines, lab=a.lab, hosts=a.hosts,
                                      name=a.name or (None if a.lab else "local"), timeout=a.timeout)
        except (PermissionError, TimeoutError, OSError) as exc:
            print(f"perfkit: error: {exc}", file=sys.stderr)
            return 1
        c.close()
        print(status_text([s for s in cluster.clusters() if s["name"] == c.name]))
        return 0
    if a.cluster_command == "status":
        states = cluster.clusters()
        print(json.dumps(states, indent=2) if a.json else status_text(states))
        return 0
    name = a.name
    if name is None:
        names = [s["name"] for s in cluster.clusters()]
        if len(names) != 1:
            raise ValueError(f"name: {len(names)} clusters are up ({', '.join(names) or 'none'}): name one")
        name = names[0]
    if not cluster.down(name):
        raise ValueError(f"name: no cluster {name!r}")
    print(f"{name}: down")
    return 0
