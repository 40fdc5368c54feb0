"""Two hosts: `perfkit serve` runs the far end of every test, `perfkit test` the near end.

The two speak over one TCP control connection per client: versioned, length-prefixed
JSON messages (4-byte big-endian length, then a JSON object with "v" and "op"):

    client                                  server
    hello {token}                      ->   hello {env}            (or error, then close)
    conf                               ->   conf {env}
    prepare {test, size, flows, ...}   ->   ready {port}           (its end of the test runs)
    start                              ->   started                (flipped: the server's sender goes)
    counters                           ->   counters {workers}     (every interval, for live rows)
    running                            ->   running {running}      (flipped: is the sender done?
                                                                     and, at least every timeout/3,
                                                                     so the server keeps waiting)
    stop                               ->   stopping               (flipped: a stop here)
    finish {sent}                      ->   result {workers, error}
    quit                               ->   bye                    (the server stops)

A malformed, oversized or out-of-order message gets an error reply and a closed
connection; the server keeps serving everyone else. Each client's test has its own
engine, so several clients run at once. The data path is the socket engine's C workers
on both sides: Python only prepares, samples and settles.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
import struct
import sys
import threading
import time

from perfkit import sandbox
from perfkit.errors import EngineError
from perfkit.spec import CONTROL_TIMEOUT_S, WAIT_SERVER_S

PROTOCOL = 1
DEFAULT_PORT = 19800
MAX_MESSAGE = 1 << 20
# the far end of each test: (role, protocol)
SERVER_ROLE = {"udp_bw": ("udp_recv", "tcp"), "udp_lat": ("udp_reflect", "tcp"),
               "tcp_bw": ("tcp_recv", "tcp"), "tcp_lat": ("tcp_pong", "tcp"),
               "sctp_bw": ("tcp_recv", "sctp"), "sctp_lat": ("tcp_pong", "sctp")}
CLIENT_ROLE = {"udp_bw": "udp_send", "udp_lat": "udp_ping", "tcp_bw": "tcp_send",
               "tcp_lat": "tcp_ping", "sctp_bw": "tcp_send", "sctp_lat": "tcp_ping"}
SERVER_MARGIN_S = 4.0  # the far end outlives the test by this, for start-up and draining
WAIT_SERVER_RETRY_S = 0.1    # a server not listening yet (-ws) is tried this often
FLIP_POLL_S = 0.1      # flipped UDP tests: how often the client asks whether the server's sender is done


def end_worker(spec, sends: bool, local_ip: str, cpu, sock_buf, remote=None, port: int = 0) -> dict:
    """The worker of one end of a remote test, on either host: the sending (pinging) end,
    or the receiving (answering) end, which outlives the test by SERVER_MARGIN_S. Flipped
    (qperf's -f1), the server sends; a stream's server end still accepts, the client connects.
    port: where this end's socket binds (the data port, qperf's -ip), 0 = any."""
    recv_role, proto = SERVER_ROLE[spec.test]
    if sends:
        w = {"role": CLIENT_ROLE[spec.test], "duration": spec.duration, "rate": spec.messages_per_second,
             "count": spec.messages, "batch": spec.batch, "gso": spec.gso}
    else:
        w = {"role": recv_role, "duration": spec.duration + SERVER_MARGIN_S,
             "batch": spec.batch if recv_role == "udp_recv" else 1}
    w.update({"local": (local_ip, port), "size": spec.size, "flows": spec.flows,
              "busy_poll": spec.polls(not sends, cpu, local_ip),
              "proto": proto, "cpu": cpu, "sock_buf": sock_buf, "flip": spec.flip,
              "access_recv": spec.access_recv})
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
    try:
        msg = json.loads(_recv_exact(sock, n))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise ProtocolError("message is not an object with an op")
    if msg.get("v") != PROTOCOL:
        raise ProtocolError(f"protocol version {msg.get('v')!r}; this perfkit speaks {PROTOCOL}")
    return msg


def _snap_out(snaps) -> list:
    """Engine snapshot -> JSON: counters and the non-empty histogram buckets."""
    return [{"c": list(c), "h": [[i, v] for i, v in enumerate(h) if v]} for c, h in snaps]


def _snap_in(workers: list) -> list:
    from perfkit.stats import Histogram
    out = []
    for w in workers:
        h = [0] * len(Histogram.LOWER)
        for i, v in w["h"]:
            h[int(i)] = int(v)
        out.append(([int(x) for x in w["c"]], h))
    return out


# --------------------------------------------------------------------------- server

def _sctp_available() -> str | None:
    """None where the kernel has SCTP, else why not."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP).close()
        return None
    except OSError as exc:
        return f"this kernel has no SCTP ({exc.strerror})"


class Server:
    """The far end of every test, for any number of clients at once.

    Bound to loopback by default. Listening anywhere else needs a shared token
    (token= or PERFKIT_TOKEN); a client without it is refused."""

    def __init__(self, bind: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                 once: bool = False, log=None):
        try:
            ip = ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(f"bind: {bind!r} is not an IPv4 or IPv6 address") from None
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port: {port} is out of range 0..65535")
        token = token if token is not None else os.environ.get("PERFKIT_TOKEN") or None
        if not ip.is_loopback and not token:
            raise ValueError(f"token: listening on {ip} (not loopback) needs a shared token "
                             "(--token or PERFKIT_TOKEN)")
        self.bind, self.token, self.once = str(ip), token, once
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._sessions: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((self.bind, int(port)))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]

    def stop(self) -> None:
        self._stop.set()

    def serve_forever(self) -> None:
        self.log(f"perfkit serve: listening on {self.bind} port {self.port}"
                 + (" (token required)" if self.token else ""))
        try:
            while not self._stop.is_set():
                try:
                    conn, peer = self._listener.accept()
                except socket.timeout:
                    continue
                t = threading.Thread(target=self._session, args=(conn, peer), daemon=True,
                                     name=f"perfkit-serve-{peer[0]}:{peer[1]}")
                self._sessions.append(t)
                t.start()
                if self.once:
                    t.join()
                    break
        finally:
            self._listener.close()
            for t in self._sessions:
                t.join(timeout=CONTROL_TIMEOUT_S)

    # one client
    def _session(self, conn: socket.socket, peer) -> None:
        conn.settimeout(CONTROL_TIMEOUT_S)
        engine = spec = None
        try:
            hello = recv_msg(conn)
            if hello["op"] != "hello":
                raise ProtocolError(f"expected hello, got {hello['op']}")
            if self.token and not hmac.compare_digest(str(hello.get("token") or ""), self.token):
                raise ProtocolError("refused: wrong or missing token (--token or PERFKIT_TOKEN)")
            from perfkit.run import environment
            from perfkit.stats import COUNTER_NAMES
            send_msg(conn, "hello", env=environment("socket"), counters=list(COUNTER_NAMES))
            local_ip = conn.getsockname()[0]
            while True:
                msg = recv_msg(conn)
                op = msg["op"]
                if op == "conf":
                    send_msg(conn, "conf", env=environment("socket"))
                elif op == "quit":
                    send_msg(conn, "bye")
                    self.log(f"perfkit serve: quit from {peer[0]}")
                    self._stop.set()
                    return
                elif op == "prepare" and engine is None:
                    engine, spec = self._prepare(msg, local_ip, peer[0])
                    conn.settimeout(spec.rem_timeout)   # the client's -rto, until it is done
                    cpu = spec.rem_cpu_affinity
                    # cpu, sock_buf, flip: what the worker got; a client that asked for them sees it was done
                    send_msg(conn, "ready", port=engine.bound_port(0), cpu=cpu, sock_buf=spec.rem_sock_buf_size,
                             flip=spec.flip, ip_port=spec.ip_port, access_recv=spec.access_recv,
                             timeout=spec.rem_timeout)
                    self.log(f"perfkit serve: {msg.get('test')}{' flipped' if spec.flip else ''} for {peer[0]} "
                             f"on port {engine.bound_port(0)}" + (f", CPU {cpu}" if cpu is not None else ""))
                elif op == "start" and engine is not None and spec.flip:   # flipped: the client is ready
                    engine.start()
                    send_msg(conn, "started")
                elif op == "running" and engine is not None:
                    send_msg(conn, "running", running=engine.running() > 0)
                elif op == "counters" and engine is not None:
                    send_msg(conn, "counters", workers=_snap_out(engine.snapshot()))
                elif op == "stop" and engine is not None:
                    engine.stop()
                    send_msg(conn, "stopping")
                elif op == "finish" and engine is not None:
                    sent = msg.get("sent") or []
                    if engine.roles[0] == "udp_recv" and sent:
                        engine.set_remote_sent(0, [int(x) for x in sent])
                    engine.stop()
                    engine.join()
                    # flipped udp_bw: what this end sent per flow, for the client's loss count
                    sent = engine.flow_sent(0) if engine.roles[0] == "udp_send" else []
                    send_msg(conn, "result", workers=_snap_out(engine.snapshot()), error=engine.error(),
                             sent=sent)
                    engine.close()
                    engine = None
                    conn.settimeout(CONTROL_TIMEOUT_S)
                else:
                    raise ProtocolError(f"unexpected {op!r} here")
        except ProtocolError as exc:
            self._refuse(conn, str(exc), peer)
        except (ValueError, TypeError, OverflowError, KeyError) as exc:  # bad fields in a message
            self._refuse(conn, str(exc), peer)
        except EngineError as exc:
            self._refuse(conn, f"engine: {exc}", peer)
        except ConnectionError as exc:  # the client left: normal between tests, not during one
            if engine is not None:
                self.log(f"perfkit serve: {peer[0]}: {exc} during a test")
        except (socket.timeout, OSError) as exc:
            self.log(f"perfkit serve: {peer[0]}: {exc}")
        finally:
            if engine is not None:
                engine.stop()
                engine.close()
            conn.close()

    def _refuse(self, conn, why: str, peer) -> None:
        self.log(f"perfkit serve: {peer[0]}: {why}")
        try:
            send_msg(conn, "error", error=why)
        except OSError:
            pass

    def _prepare(self, msg: dict, local_ip: str, peer_ip: str):
        """This end's engine, started, or, flipped, made and left for the client's start."""
        from perfkit._sock import SockEngine
        from perfkit.spec import RemoteTest, check_cpu_here, check_target
        # the same validation as the client's, on what arrived
        spec = RemoteTest(host="127.0.0.1", test=msg.get("test", ""), size=msg.get("size"),
                          flows=msg.get("flows", 1), duration=msg.get("duration", 10),
                          batch=msg.get("batch", 32), gso=msg.get("gso", 0),
                          busy_poll=msg.get("busy_poll"),
                          rem_cpu_affinity=msg.get("cpu"), rem_sock_buf_size=msg.get("sock_buf"),
                          flip=msg.get("flip", False), rate=msg.get("rate"), messages=msg.get("messages"),
                          ip_port=msg.get("ip_port", 0), access_recv=msg.get("access_recv", False),
                          rem_timeout=msg.get("timeout", CONTROL_TIMEOUT_S))
        cpu = check_cpu_here(spec.rem_cpu_affinity, "rem_cpu_affinity")
        if SERVER_ROLE[spec.test][1] == "sctp" and (why := _sctp_available()):
            raise ValueError(f"test: {spec.test} cannot run on the server: {why}")
        remote, port = None, spec.ip_port
        if spec.flip and spec.test.startswith("udp"):
            # datagrams go to the client's address on the control connection, nowhere else
            remote, port = (check_target(peer_ip, "client"), _int_field(msg, "port")), 0
        engine = SockEngine([end_worker(spec, spec.flip, local_ip, cpu, spec.rem_sock_buf_size, remote, port)])
        if not spec.flip:
            engine.start()
        return engine, spec


def _int_field(msg: dict, name: str) -> int:
    v = msg.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536:
        raise ValueError(f"{name}: {v!r} is not a port number")
    return v


def serve(bind: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
          once: bool = False) -> None:
    """Run a server until quit (or, with once, until its first client is done)."""
    Server(bind, port, token, once).serve_forever()


# --------------------------------------------------------------------------- client

class Control:
    """The client's end of a control connection."""

    def __init__(self, host: str, port: int = DEFAULT_PORT, token: str | None = None,
                 wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S):
        token = token if token is not None else os.environ.get("PERFKIT_TOKEN") or None
        self.timeout = timeout
        self.last_request = time.monotonic()
        self.broken = None   # why the connection was given up: a late answer would answer the wrong request
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
        hello = self.request("hello", token=token)
        self.remote_env = hello["env"]
        self.remote_counters = hello.get("counters")   # the order its counters come in

    def request(self, op: str, **fields) -> dict:
        if self.broken:
            raise EngineError(f"control connection: closed after {self.broken}")
        self.last_request = time.monotonic()
        try:
            send_msg(self.sock, op, **fields)
            reply = recv_msg(self.sock)
        except (OSError, ConnectionError, ProtocolError) as exc:
            self.broken = (f"no answer to {op} from the server in {self.timeout:g} s (loc_timeout, -lto)"
                           if isinstance(exc, TimeoutError) else str(exc))
            self.sock.close()
            raise EngineError(f"control connection: {self.broken}") from None
        if reply["op"] == "error":
            raise EngineError(f"server: {reply.get('error')}")
        return reply

    def close(self) -> None:
        self.sock.close()


class RemoteHandle:
    """An engine handle for perfkit.Run whose far end is a perfkit server: the local C
    worker sends and the server's receives (flipped, the other way); snapshots hold both."""

    def __init__(self, spec):
        from perfkit._sock import SockEngine
        from perfkit.spec import check_cpu_here
        if spec.test.startswith("sctp") and (why := _sctp_available()):
            raise ValueError(f"test: {spec.test} cannot run here: {why}")
        loc_cpu = check_cpu_here(spec.loc_cpu_affinity, "loc_cpu_affinity")
        self.flip = spec.flip
        self.ctl = Control(spec.host, spec.port, spec.token, spec.wait_server, spec.loc_timeout)
        self.keepalive_s = spec.rem_timeout / 3   # a message at least this often: the server waits rem_timeout
        self.local = None
        try:
            local_ip = self.ctl.sock.getsockname()[0]
            from perfkit.stats import COUNTER_NAMES
            if self.ctl.remote_counters != list(COUNTER_NAMES):   # its counters would be read as others
                raise EngineError(f"the server's perfkit ({self.ctl.remote_env.get('perfkit')}) counts other "
                                  "things than this one: run the same perfkit build on both hosts")
            udp_flip = spec.flip and spec.test.startswith("udp")
            if udp_flip:   # bound first: the server sends to its port
                self.local = SockEngine([end_worker(spec, False, local_ip, loc_cpu, spec.loc_sock_buf_size,
                                                    port=spec.ip_port)])
            # whether the far end polls is decided here, where both ends' CPUs are known (a
            # latency test's two ends on one CPU must not spin): the server answers on spec.host
            far_polls = spec.polls(not spec.flip, spec.rem_cpu_affinity, spec.host)
            ready = self.ctl.request("prepare", test=spec.test, size=spec.size, flows=spec.flows,
                                     duration=spec.duration, batch=spec.batch, gso=spec.gso,
                                     busy_poll=far_polls, cpu=spec.rem_cpu_affinity,
                                     sock_buf=spec.rem_sock_buf_size, flip=spec.flip,
                                     rate=spec.messages_per_second or None, messages=spec.messages,
                                     port=self.local.bound_port(0) if udp_flip else None, ip_port=spec.ip_port,
                                     access_recv=spec.access_recv, timeout=spec.rem_timeout)
            older = f"(perfkit {self.ctl.remote_env.get('perfkit')} there is older than"
            if ready.get("cpu") != spec.rem_cpu_affinity:   # a server from before -rca ignores it
                raise EngineError(f"rem_cpu_affinity: the server did not pin its worker to CPU "
                                  f"{spec.rem_cpu_affinity} {older} -rca)")
            if ready.get("sock_buf") != spec.rem_sock_buf_size:   # likewise before -rsb
                raise EngineError(f"rem_sock_buf_size: the server did not set its socket buffers {older} -rsb)")
            if bool(ready.get("flip")) != spec.flip:   # and before -f1
                raise EngineError(f"flip: the server does not send {older} -f1)")
            if ready.get("ip_port", 0) != spec.ip_port:   # and before -ip
                raise EngineError(f"ip_port: the server did not take data port {spec.ip_port} {older} -ip)")
            if ready.get("access_recv", False) != spec.access_recv:   # and before -ar
                raise EngineError(f"access_recv: the server does not read what it receives {older} -ar)")
            if ready.get("timeout", CONTROL_TIMEOUT_S) != spec.rem_timeout:   # and before -rto
                raise EngineError(f"rem_timeout: the server does not wait {spec.rem_timeout:g} s {older} -rto)")
            if not udp_flip:
                self.local = SockEngine([end_worker(spec, not spec.flip, local_ip, loc_cpu, spec.loc_sock_buf_size,
                                                    remote=(spec.host, int(ready["port"])))])
        except BaseException:
            if self.local is not None:
                self.local.close()
            self.ctl.close()
            raise
        from perfkit.stats import COUNTERS, Histogram
        recv_role = SERVER_ROLE[spec.test][0]
        self.roles = ([recv_role, "remote_" + CLIENT_ROLE[spec.test]] if spec.flip
                      else [CLIENT_ROLE[spec.test], "remote_" + recv_role])
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
            return _snap_in(self.ctl.request("counters")["workers"])
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
            self._final = _snap_in(reply["workers"])
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

    def error(self):
        return self.local.error() or self._error

    def close(self):
        self.local.close()
        self.ctl.close()


def conf(host: str, port: int = DEFAULT_PORT, token: str | None = None,
         wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S) -> dict:
    """{"local": env, "remote": env}: host, CPU, OS, kernel, perfkit version of both ends."""
    from perfkit.run import environment
    ctl = Control(host, port, token, wait_server, timeout)
    try:
        return {"local": environment("socket"), "remote": ctl.request("conf")["env"]}
    finally:
        ctl.close()


def quit_server(host: str, port: int = DEFAULT_PORT, token: str | None = None,
                wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S) -> None:
    """Ask the server to stop."""
    ctl = Control(host, port, token, wait_server, timeout)
    try:
        ctl.request("quit")
    finally:
        ctl.close()


# --------------------------------------------------------------------------- sweeps

# qperf's option names -> RemoteTest fields, with the unit parser of each
SWEEPABLE = {"msg_size": "size", "time": "duration", "rate": "rate", "flows": "flows", "no_msgs": "messages"}
MAX_POINTS = 1000


def parse_sweep(text: str) -> tuple[str, list]:
    """qperf's -oo OPT:FROM:TO:STEP, STEP *N (multiply) or +N (add): ("msg_size",
    [1, 2, 4, ...]). Values use the option's own units (64K, 10s, 1Mpps)."""
    from perfkit.units import parse_duration, parse_rate, parse_size
    parts = str(text).split(":")
    if len(parts) != 4:
        raise ValueError(f"sweep: {text!r} is not OPT:FROM:TO:STEP (e.g. msg_size:1:64K:*2)")
    opt, lo, hi, step = (p.strip() for p in parts)
    if opt not in SWEEPABLE:
        raise ValueError(f"sweep: {opt!r} is not one of {', '.join(SWEEPABLE)}")
    parse = {"msg_size": lambda v: parse_size(v, "sweep"), "flows": lambda v: parse_size(v, "sweep"),
             "no_msgs": lambda v: parse_size(v, "sweep"),
             "time": lambda v: parse_duration(v, "sweep"),
             "rate": lambda v: parse_rate(v, "sweep").value}[opt]
    start, stop = parse(lo), parse(hi)
    if not 0 < start <= stop:
        raise ValueError(f"sweep: {text!r} needs 0 < FROM <= TO")
    if step[:1] == "*":
        try:
            factor = float(step[1:])
        except ValueError:
            raise ValueError(f"sweep: step {step!r} is not *N with a number N") from None
        if not factor > 1:
            raise ValueError(f"sweep: step {step!r} must multiply by more than 1")
        nxt = lambda v: v * factor  # noqa: E731
    elif step[:1] == "+":
        inc = parse(step[1:])
        if not inc > 0:
            raise ValueError(f"sweep: step {step!r} must add more than 0")
        nxt = lambda v: v + inc  # noqa: E731
    else:
        raise ValueError(f"sweep: step {step!r} is not *N or +N")
    values, v = [], start
    while v <= stop * (1 + 1e-9):
        values.append(int(v) if isinstance(start, int) and float(v).is_integer() else v)
        if len(values) > MAX_POINTS:
            raise ValueError(f"sweep: {text!r} has more than {MAX_POINTS} points")
        v = nxt(v)
    return opt, values


def plan(host: str, *tests: str, time="10s", sweep: dict | None = None, port: int = DEFAULT_PORT,
         token: str | None = None, **fields) -> list[tuple[str, dict, object]]:
    """[(test, point, RemoteTest)] for every test at every sweep point, all checked
    before anything runs. sweep: {"msg_size": "1:64K:*2", ...} (several: every mix)."""
    from perfkit.spec import RemoteTest
    points = [{}]
    for opt, spec in (sweep or {}).items():
        _, values = parse_sweep(f"{opt}:{spec}")
        points = [{**p, opt: v} for p in points for v in values]
    out = []
    for t in tests:
        for point in points:
            kw = {"duration": time, **fields, **{SWEEPABLE[k]: v for k, v in point.items()}}
            out.append((t, point, RemoteTest(host=host, test=t, port=port, token=token, **kw)))
    return out


def test(host: str, *tests: str, time="10s", sweep: dict | None = None, port: int = DEFAULT_PORT,
         token: str | None = None, progress=None, stop: threading.Event | None = None, **fields):
    """qperf from Python: one polars row per test and sweep point, with its summary.

        perfkit.test("198.18.0.2", "tcp_bw", "tcp_lat", time="2s", sweep={"msg_size": "1:64K:*2"})

    progress: called with each point's row as it finishes. stop: an Event; once set, the
    point going on ends at once and is left out, and the rows so far are returned (the
    notebook panel's Stop)."""
    import polars as pl
    from perfkit.run import Run
    rows = []
    for t, point, spec in plan(host, *tests, time=time, sweep=sweep, port=port, token=token, **fields):
        if stop is not None and stop.is_set():
            break
        run = Run(spec).start()
        if stop is not None:
            while not run.wait(0.05):
                if stop.is_set():
                    run.stop()
            if stop.is_set():
                break
        run.wait()
        s = {k: v for k, v in run.summary.items() if not isinstance(v, dict)}
        rows.append({"test": t, **point, **s})
        if progress is not None:
            progress(dict(rows[-1]))
    return pl.DataFrame(rows)
