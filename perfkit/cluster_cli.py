"""perfkit cluster up|status|down: ipyparallel clusters to run one load from many hosts (perfkit.cluster)."""
from __future__ import annotations

import contextlib
import importlib.util
import json
import sys

from perfkit import cluster
from perfkit.fields import applies, float_arg, int_arg

CONNECT_S = 10.0   # how long --cluster waits for the controller and its engines to answer


def add_parser(sub) -> None:
    """perfkit cluster's parser in sub (argparse subparsers)."""
    p = sub.add_parser("cluster", help="engines on many hosts (lab hosts, or local) for one load (ipyparallel)")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a controller and engines; they stay up until perfkit cluster down")
    up.add_argument("--lab", help="one engine in each host of this lab (perfkit lab up), inside its namespace")
    applies(up.add_argument("--hosts", help="which hosts of the lab: h1,h2,h3 (default every host)"), lab=True)
    up.add_argument("-n", "--engines", type=int_arg, help="without --lab: this many local engines (default 3)")
    up.add_argument("--name", help="the cluster's name (default the lab's name, or local)")
    up.add_argument("--timeout", type=float_arg, default=60.0, help="seconds the engines may take to register (default 60)")
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


# ------------------------------------------------------------------ --cluster NAME on the commands that make load
def connect(a, spec=None):
    """--cluster NAME (a perfkit cluster or an ipyparallel profile): the cluster, every engine
    of it answering (and spec, if given, split over them); None without the option. Bad input
    (no such cluster, no engines, a spec that does not split) is a ValueError: one line, exit 2,
    before anything starts."""
    name = getattr(a, "cluster", None)
    if name is None:
        return None
    if not name.strip():
        raise ValueError("cluster: name a cluster (perfkit cluster status lists them)")
    if importlib.util.find_spec("ipyparallel") is None:
        raise ValueError("cluster: --cluster runs on ipyparallel, which is not installed here (pip install ipyparallel)")
    c = cluster.Cluster.connect(name.strip(), timeout=CONNECT_S)
    try:
        c.engines()   # every engine answers now, or one line naming the cluster
        if spec is not None:
            c.shares(spec)   # it splits, and where a port per engine needs lab hosts, they are
    except ValueError as exc:
        c.close()
        raise exc if isinstance(exc, cluster.ClusterError) else cluster.ClusterError(f"cluster: {exc}") from None
    except BaseException:
        c.close()
        raise
    return c


@contextlib.contextmanager
def connected(a, spec=None):
    """with connected(a) as c: connect(a, spec), closed at the end (the cluster stays up)."""
    c = connect(a, spec)
    try:
        yield c
    finally:
        if c is not None:
            c.close()


def hosts_text(run) -> str:
    """A cluster run's last lines, after its summary: the hosts and the measured start skew,
    then each host's share (requests, or packets/messages sent and received); "" for a run
    on one host."""
    s = run.summary or {}
    hosts = s.get("hosts")
    if run.cluster is None or not hosts:
        return ""
    skew = s.get("start_skew_s")
    line = (f"cluster {s.get('cluster') or run.cluster.name}: {len(hosts)} hosts ({', '.join(hosts)}), start skew "
            + (f"{skew * 1e3:.3f} ms" if skew is not None else "not measured"))
    off = {h: o for h, o in (s.get("clock_offset_s") or {}).items() if abs(o) > run.interval}
    if off:   # their rows are off by as much: the hosts' clocks need syncing
        line += "; clock off by more than the interval: " + ", ".join(f"{h} {o:+.3f} s" for h, o in off.items())
    width = max(len(h) for h in hosts)
    lines = [line]
    for h, hs in hosts.items():
        lines.append(f"    {h:<{width}}  {_share(hs)}  "
                     + ("finished" if hs.get("finished") else f"error: {hs.get('error', 'did not finish')}"))
    return "\n" + "\n".join(lines)


def _share(hs: dict) -> str:
    """One host's figures: an HTTP load's requests, a socket test's packets (messages)."""
    if hs.get("test") == "http":
        return (f"{hs.get('requests', 0):,} requests  {hs.get('tps', 0.0):,.1f} req/s  "
                f"{hs.get('http_err', 0):,} errors")
    unit = "packets" if str(hs.get("test", "")).startswith("udp") else "messages"
    return f"{hs.get('pkts_tx', 0):,} {unit} sent  {hs.get('pkts_rx', 0):,} received  {hs.get('msg_rate', 0.0):,.0f}/s"
