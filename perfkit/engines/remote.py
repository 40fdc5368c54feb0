"""The client of a perfkit server: the control protocol, and RemoteHandle, the engine
handle of a RemoteTest (its far end runs in `perfkit serve`, perfkit.server.Server).

The two speak over one TCP control connection per client: versioned, length-prefixed
JSON messages (4-byte big-endian length, then a JSON object with "v" and "op"):

    client                                  server
    hello                              ->   hello {env}            (no token), or
                                            challenge {nonce}      (a token: prove it, never send it)
    auth {mac}                         ->   hello {env}            (or error, then close)
    conf                               ->   conf {env}
    prepare {test, size, flows, ...}   ->   ready {port}           (its end of the test runs)
    start                              ->   started                (flipped: the server's sender goes)
    counters                           ->   counters {workers}     (every interval, for live rows)
    running                            ->   running {running}      (flipped: is the sender done?
                                                                     and, at least every timeout/3,
                                                                     so the server keeps waiting)
    stop                               ->   stopping               (flipped: a stop here)
    set_rate {rate}                    ->   rate_set               (flipped udp_bw: the server's
                                                                     sender paces at rate messages/s)
    finish {sent}                      ->   result {workers, error}
    quit                               ->   bye                    (the server stops)

The token never crosses the wire: the client answers the server's one-time nonce with
HMAC-SHA256(token, nonce) (auth_mac), so a recorded exchange cannot be replayed. Messages
are bounded in size and nesting on both ends (a hostile server is held to the same limits).
A malformed, oversized or out-of-order message gets an error reply and a closed
connection; the server keeps serving everyone else. Each client's test has its own
engine, so several clients run at once. The data path is the socket engine's C workers
on both sides: Python only prepares, samples and settles.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import select
import socket
import struct
import threading
import time

from perfkit import sandbox
from perfkit.errors import EngineError
from perfkit.stats import COUNTER_NAMES, COUNTERS, Histogram

PROTOCOL = 2
DEFAULT_PORT = 19800
MAX_MESSAGE = 1 << 20
MAX_DEPTH = 16          # nesting of a message's JSON: ours go 4 deep
WAIT_SERVER_S = 5.0        # a server not listening yet is tried this long (qperf's -ws default)
CONTROL_TIMEOUT_S = 30.0   # a control request's answer, and a server's wait for its client, this long
# the far end of each test: (role, protocol)
SERVER_ROLE = {"udp_bw": ("udp_recv", "tcp"), "udp_lat": ("udp_reflect", "tcp"),
               "tcp_bw": ("tcp_recv", "tcp"), "tcp_lat": ("tcp_pong", "tcp"),
               "sctp_bw": ("tcp_recv", "sctp"), "sctp_lat": ("tcp_pong", "sctp")}
CLIENT_ROLE = {"udp_bw": "udp_send", "udp_lat": "udp_ping", "tcp_bw": "tcp_send",
               "tcp_lat": "tcp_ping", "sctp_bw": "tcp_send", "sctp_lat": "tcp_ping"}
SERVER_MARGIN_S = 4.0  # the far end outlives the test by this, for start-up and draining
WAIT_SERVER_RETRY_S = 0.1    # a server not listening yet (-ws) is tried this often
FLIP_POLL_S = 0.1      # flipped UDP tests: how often the client asks whether the server's sender is done


def end_worker(end: dict, sends: bool, local_ip: str, cpu, sock_buf, busy_poll: bool, remote=None,
               port: int = 0) -> dict:
    """The worker of one end of a remote test, on either host: the sending (pinging) end,
    or the receiving (answering) end, which outlives the test by SERVER_MARGIN_S. Flipped
    (qperf's -f1), the server sends; a stream's server end still accepts, the client connects.
    end: the test's fields both ends share (perfkit.kinds.qperf.end_fields: test, duration,
    rate, count, batch, gso, size, flows, flip, access_recv); busy_poll: whether this end
    spins on its socket; port: where this end's socket binds (the data port, qperf's -ip), 0 = any."""
    recv_role, proto = SERVER_ROLE[end["test"]]
    if sends:
        w = {"role": CLIENT_ROLE[end["test"]], "duration": end["duration"], "rate": end["rate"],
             "count": end["count"], "batch": end["batch"], "gso": end["gso"]}
    else:
        w = {"role": recv_role, "duration": end["duration"] + SERVER_MARGIN_S,
             "batch": end["batch"] if recv_role == "udp_recv" else 1}
    w.update({"local": (local_ip, port), "size": end["size"], "flows": end["flows"], "busy_poll": busy_poll,
              "proto": proto, "cpu": cpu, "sock_buf": sock_buf, "flip": end["flip"],
              "access_recv": end["access_recv"]})
    if remote is not None:
        w["remote"] = remote
    return w


class ProtocolError(Exception):
    """The peer broke the control protocol."""


def send_msg(sock: socket.socket, op: str, **fields) -> None:
    data = json.dumps({"v": PROTOCOL, "op": op, **fields}).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"{op}: message of {len(data)} bytes is over {MAX_MESSAGE}")
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the peer closed the control connection")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket) -> dict:
    """One message; ProtocolError if it is oversized, not JSON, or not ours."""
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    if n > MAX_MESSAGE:
        raise ProtocolError(f"message of {n} bytes is over the limit of {MAX_MESSAGE}")
    return parse_msg(_recv_exact(sock, n))


def parse_msg(data: bytes) -> dict:
    """A message's JSON body checked: an object with an op, our version, nested at most MAX_DEPTH."""
    try:
        msg = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError(f"message is nested deeper than {MAX_DEPTH}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise ProtocolError("message is not an object with an op")
    if not _shallow(msg, MAX_DEPTH):
        raise ProtocolError(f"message is nested deeper than {MAX_DEPTH}")
    if msg.get("v") != PROTOCOL:
        raise ProtocolError(f"protocol version {msg.get('v')!r}; this perfkit speaks {PROTOCOL}")
    return msg


def _shallow(obj, depth: int) -> bool:
    """Is obj nested at most depth levels of lists and objects?"""
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, list):
        return True
    return depth > 0 and all(_shallow(x, depth - 1) for x in obj if isinstance(x, (dict, list)))


def printable(text, limit: int = 300) -> str:
    """Peer-supplied text made safe for a terminal or a log: control characters (escapes,
    newlines that would fake a line) shown escaped, and cut at limit characters."""
    text = str(text)
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


def auth_mac(token: str, nonce: str) -> str:
    """The answer to a server's challenge: HMAC-SHA256 of its nonce under the token (UTF-8)."""
    return hmac.new(token.encode("utf-8"), b"perfkit-serve\0" + nonce.encode("ascii", "replace"),
                    hashlib.sha256).hexdigest()


def snapshot_out(snaps) -> list:
    """Engine snapshot -> JSON: counters and the non-empty histogram buckets."""
    return [{"c": list(c), "h": [[i, v] for i, v in enumerate(h) if v]} for c, h in snaps]


def snapshot_in(workers: list) -> list:
    out = []
    for w in workers:
        h = [0] * len(Histogram.LOWER)
        for i, v in w["h"]:
            h[int(i)] = int(v)
        out.append(([int(x) for x in w["c"]], h))
    return out


def sctp_unavailable() -> str | None:
    """None where the kernel has SCTP, else why not."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP).close()
        return None
    except OSError as exc:
        return f"this kernel has no SCTP ({exc.strerror})"


class Control:
    """The client's end of a control connection."""

    def __init__(self, host: str, port: int = DEFAULT_PORT, token: str | None = None,
                 wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S):
        token = token if token is not None else os.environ.get("PERFKIT_TOKEN") or None
        self.timeout = timeout
        self.last_request = time.monotonic()
        self.broken = None   # why the connection was given up: a late answer would answer the wrong request
        self._lock = threading.Lock()   # set_rate may come from another thread than the sampler's requests
        sandbox.check(host, "host")
        deadline = time.monotonic() + wait_server
        while True:   # as qperf -ws: a server not listening yet is tried again until the deadline
            try:
                self.sock = socket.create_connection(
                    (host, port), timeout=min(CONTROL_TIMEOUT_S, max(deadline - time.monotonic(), 1.0)))
                self.sock.settimeout(timeout)   # the connect's own timeout is not the requests'
                break
            except OSError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    waited = f" (tried for {wait_server:g} s)" if wait_server > 0 else ""
                    raise EngineError(f"cannot reach perfkit serve at {host} port {port}: "
                                      f"{exc.strerror or exc}{waited}") from None
                time.sleep(min(WAIT_SERVER_RETRY_S, left))   # the last try falls on the deadline
        hello = self.request("hello")
        if hello["op"] == "challenge":   # the server has a token: prove we hold it (without one, it refuses)
            hello = self.request("auth", mac=auth_mac(token, str(hello.get("nonce"))) if token else "")
        if hello["op"] != "hello" or not isinstance(hello.get("env"), dict):
            self.close()
            raise EngineError(f"control connection: expected hello from the server, got {hello['op']!r}")
        self.remote_env = hello["env"]
        self.remote_counters = hello.get("counters")   # the order its counters come in

    def request(self, op: str, **fields) -> dict:
        if self.broken:
            raise EngineError(f"control connection: closed after {self.broken}")
        try:
            with self._lock:
                self.last_request = time.monotonic()
                send_msg(self.sock, op, **fields)
                reply = recv_msg(self.sock)
        except (OSError, ConnectionError, ProtocolError) as exc:
            self.broken = (f"no answer to {op} from the server in {self.timeout:g} s (loc_timeout, -lto)"
                           if isinstance(exc, TimeoutError) else str(exc))
            self.sock.close()
            raise EngineError(f"control connection: {self.broken}") from None
        if reply["op"] == "error":
            raise EngineError(f"server: {printable(reply.get('error'))}")
        return reply

    def peer_gone(self) -> bool:
        """Has the server closed the control connection (it stopped or died)? Without waiting:
        the server never speaks unasked, so a readable connection between requests is its end."""
        if self.broken:
            return True
        try:
            if not select.select([self.sock], [], [], 0)[0]:
                return False
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()


class RemoteHandle:
    """An engine handle for perfkit.Run whose far end is a perfkit server: the local C
    worker sends and the server's receives (flipped, the other way); snapshots hold both.

    plan (perfkit.kinds.qperf.remote_plan): host, port, token, wait_server, loc_timeout
    (the control connection); keepalive_s (a message at least this often); cpu, sock_buf
    (this host's worker); polls ({"loopback": .., "other": ..}: whether this host's worker
    spins, by whether the control connection's local address is loopback); end (the
    fields both ends share, end_worker's); prepare (the prepare request, but the port)."""

    def __init__(self, plan: dict):
        from perfkit._sock import SockEngine  # the native engine may be missing from a broken build
        end, want = plan["end"], plan["prepare"]
        test, flip = end["test"], end["flip"]
        if test.startswith("sctp") and (why := sctp_unavailable()):
            raise ValueError(f"test: {test} cannot run here: {why}")
        loc_cpu = plan["cpu"]
        self.flip = flip
        self.ctl = Control(plan["host"], plan["port"], plan["token"], plan["wait_server"], plan["loc_timeout"])
        self.keepalive_s = plan["keepalive_s"]   # a message at least this often: the server waits rem_timeout
        self.local = None
        try:
            local_ip = self.ctl.sock.getsockname()[0]
            polls = plan["polls"]["loopback" if ipaddress.ip_address(local_ip).is_loopback else "other"]
            if self.ctl.remote_counters != list(COUNTER_NAMES):   # its counters would be read as others
                raise EngineError(f"the server's perfkit ({self.ctl.remote_env.get('perfkit')}) counts other "
                                  "things than this one: run the same perfkit build on both hosts")
            udp_flip = flip and test.startswith("udp")
            if udp_flip:   # bound first: the server sends to its port
                self.local = SockEngine([end_worker(end, False, local_ip, loc_cpu, plan["sock_buf"], polls,
                                                    port=want["ip_port"])])
            ready = self.ctl.request("prepare", **want, port=self.local.bound_port(0) if udp_flip else None)
            older = f"(perfkit {self.ctl.remote_env.get('perfkit')} there is older than"
            if ready.get("cpu") != want["cpu"]:   # a server from before -rca ignores it
                raise EngineError(f"rem_cpu_affinity: the server did not pin its worker to CPU "
                                  f"{want['cpu']} {older} -rca)")
            if ready.get("sock_buf") != want["sock_buf"]:   # likewise before -rsb
                raise EngineError(f"rem_sock_buf_size: the server did not set its socket buffers {older} -rsb)")
            if bool(ready.get("flip")) != flip:   # and before -f1
                raise EngineError(f"flip: the server does not send {older} -f1)")
            if ready.get("ip_port", 0) != want["ip_port"]:   # and before -ip
                raise EngineError(f"ip_port: the server did not take data port {want['ip_port']} {older} -ip)")
            if ready.get("access_recv", False) != want["access_recv"]:   # and before -ar
                raise EngineError(f"access_recv: the server does not read what it receives {older} -ar)")
            if ready.get("timeout", CONTROL_TIMEOUT_S) != want["timeout"]:   # and before -rto
                raise EngineError(f"rem_timeout: the server does not wait {want['timeout']:g} s {older} -rto)")
            if not udp_flip:
                self.local = SockEngine([end_worker(end, not flip, local_ip, loc_cpu, plan["sock_buf"], polls,
                                                    remote=(plan["host"], int(ready["port"])))])
        except BaseException:
            if self.local is not None:
                self.local.close()
            self.ctl.close()
            raise
        recv_role = SERVER_ROLE[test][0]
        self.roles = ([recv_role, "remote_" + CLIENT_ROLE[test]] if flip
                      else [CLIENT_ROLE[test], "remote_" + recv_role])
        self._last_remote = [([0] * len(COUNTERS), [0] * len(Histogram.LOWER))]
        self._final = None
        self._error = None
        self._sender_done = False
        self._asked_at = 0.0

    def start(self):
        self.local.start()
        if self.flip:   # this end is ready: the server's sender may go
            self.ctl.request("start")

    def stop(self):
        if self.flip and not self._sender_done:   # the sender is the server's
            try:
                self.ctl.request("stop")
            except EngineError as exc:
                self._error = self._error or str(exc)
        self.local.stop()

    def running(self):
        """Flipped, the sender is the server's: ask it every FLIP_POLL_S whether it is done
        (a UDP receiver here could not tell; a TCP one also sees EOF), then drain and end.
        Either way a message goes at least every keepalive_s: the server gives up on a
        client silent for rem_timeout (rows, which ask for its counters, may be further apart)."""
        if not self.local.running():
            return False
        if self.ctl.peer_gone():   # a UDP sender would not notice: it stops now, its counts kept
            self._error = self._error or "the server closed the control connection during the test (it stopped or died)"
            self._sender_done = True
            self.local.stop()
            return self.local.running() > 0
        now = time.monotonic()
        flip_due = self.flip and not self._sender_done and now - self._asked_at >= FLIP_POLL_S
        if flip_due or now - self.ctl.last_request >= self.keepalive_s:
            self._asked_at = now
            try:
                sending = self.ctl.request("running")["running"]
                self._sender_done = self._sender_done or (self.flip and not sending)
            except EngineError as exc:   # the server is gone: nothing more will arrive
                self._error = self._error or str(exc)
                self._sender_done = self.flip
            if self._sender_done:
                self.local.stop()
        return self.local.running() > 0

    def _remote_snap(self):
        if self._final is not None:
            return self._final
        try:
            return snapshot_in(self.ctl.request("counters")["workers"])
        except EngineError as exc:
            self._error = self._error or str(exc)
            return None

    def snapshot(self):
        local = self.local.snapshot()
        remote = self._remote_snap()
        if remote is None:  # the server is gone: its last counters stand
            remote = self._last_remote
        self._last_remote = remote
        return list(local) + list(remote)

    def join(self):
        if not self.flip:
            self.local.join()
        sent = self.local.flow_sent(0) if self.roles[0] == "udp_send" else []
        try:
            reply = self.ctl.request("finish", sent=sent)
            self._final = snapshot_in(reply["workers"])
            if reply.get("error"):
                self._error = self._error or f"server: {reply['error']}"
            if self.flip and self.roles[0] == "udp_recv" and reply.get("sent"):
                # loss settles against what the server's sender sent, as the server's does
                self.local.set_remote_sent(0, [int(x) for x in reply["sent"]])
        except EngineError as exc:
            self._error = self._error or str(exc)
        finally:
            if self.flip:
                self.local.join()

    def set_rate(self, rate: float) -> None:
        """udp_bw: the sender paces at rate messages/s from its next batch (0: unpaced): this
        host's own worker, or, flipped, the server's (a set_rate message)."""
        if self.roles[0] == "udp_send":
            self.local.set_rate(rate)
        elif self.roles[1] == "remote_udp_send":
            self.ctl.request("set_rate", rate=float(rate))
        else:
            raise ValueError(f"set_rate: a {self.roles[0]} test has no rate to change (udp_bw only)")

    def error(self):
        return self.local.error() or self._error

    def close(self):
        self.local.close()
        self.ctl.close()

def quit_server(host: str, port: int = DEFAULT_PORT, token: str | None = None,
                wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S) -> None:
    """Ask the server to stop."""
    ctl = Control(host, port, token, wait_server, timeout)
    try:
        ctl.request("quit")
    finally:
        ctl.close()
