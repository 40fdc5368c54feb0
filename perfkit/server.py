"""`perfkit serve`: the far end of every remote test, for any number of clients at once;
the protocol and the client are perfkit.engines.remote's."""
from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import sys
import threading

from perfkit.engines.remote import (DEFAULT_PORT, SERVER_ROLE, Control, ProtocolError, end_worker, recv_msg,
                                    sctp_unavailable, send_msg, snapshot_out)
from perfkit.errors import EngineError
from perfkit.run import environment
from perfkit.kinds import RemoteTest
from perfkit.kinds.qperf import end_fields
from perfkit.spec import CONTROL_TIMEOUT_S, WAIT_SERVER_S, check_cpu_here, check_target
from perfkit.stats import COUNTER_NAMES


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
                    send_msg(conn, "counters", workers=snapshot_out(engine.snapshot()))
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
                    send_msg(conn, "result", workers=snapshot_out(engine.snapshot()), error=engine.error(),
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
        from perfkit._sock import SockEngine  # the native engine may be missing from a broken build
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
        if SERVER_ROLE[spec.test][1] == "sctp" and (why := sctp_unavailable()):
            raise ValueError(f"test: {spec.test} cannot run on the server: {why}")
        remote, port = None, spec.ip_port
        if spec.flip and spec.test.startswith("udp"):
            # datagrams go to the client's address on the control connection, nowhere else
            remote, port = (check_target(peer_ip, "client"), _int_field(msg, "port")), 0
        engine = SockEngine([end_worker(end_fields(spec), spec.flip, local_ip, cpu, spec.rem_sock_buf_size,
                                        spec.polls(not spec.flip, cpu, local_ip), remote, port)])
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


def conf(host: str, port: int = DEFAULT_PORT, token: str | None = None,
         wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S) -> dict:
    """{"local": env, "remote": env}: host, CPU, OS, kernel, perfkit version of both ends."""
    ctl = Control(host, port, token, wait_server, timeout)
    try:
        return {"local": environment("socket"), "remote": ctl.request("conf")["env"]}
    finally:
        ctl.close()
