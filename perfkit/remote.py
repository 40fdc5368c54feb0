"""Two hosts: `perfkit serve` runs the far end of every test, `perfkit test` the near end.

The old home of what now lives by layer, every name still importable from here:
the control protocol, its client and RemoteHandle in perfkit.engines.remote, the server
and conf in perfkit.server, qperf's sweeps (plan, test) in perfkit.sweep.
"""
from __future__ import annotations

from perfkit.engines.remote import (CLIENT_ROLE, DEFAULT_PORT, FLIP_POLL_S, MAX_MESSAGE, PROTOCOL,  # noqa: F401
                                    SERVER_MARGIN_S, SERVER_ROLE, WAIT_SERVER_RETRY_S, Control, ProtocolError,
                                    RemoteHandle, end_worker, quit_server, recv_msg, sctp_unavailable, send_msg,
                                    snapshot_in, snapshot_out)
from perfkit.server import Server, conf, serve  # noqa: F401
from perfkit.spec import CONTROL_TIMEOUT_S, WAIT_SERVER_S  # noqa: F401
from perfkit.sweep import MAX_POINTS, SWEEPABLE, parse_sweep, plan, test  # noqa: F401
