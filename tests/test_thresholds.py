"""Error rates that count every unanswered request, thresholds with their exit status, and
user ladders: HTTP load on loopback against perfkit http-serve or a socket that never answers."""
import resource
import socket
import time

import perfkit
from perfkit.report import summary_text
from perfkit.spec import HttpLoad


def _silent_listener(backlog: int = 4096) -> socket.socket:
    """A server that accepts (the kernel completes the handshakes) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def test_requests_cut_off_by_the_end_are_errors_not_a_zero_rate():
    # the study: 18,000 users once read a 0% error rate here (fewer where open files are fewer)
    users = min(18000, resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 500)
    with _silent_listener() as srv:
        t0 = time.monotonic()
        # the response timeout is past the end: every request is still out when the run ends
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{srv.getsockname()[1]}/", users=users, duration=1,
                                 response_timeout="30s", connect_timeout="30s")).summary
        took = time.monotonic() - t0
    assert s["requests"] == s["http_cut"] == users and s["responses"] == 0, s
    assert s["error_rate_pct"] == 100.0 and s["unanswered"] == users
    text = summary_text(s)
    assert "100.00 %" in text and f"{users:,} requests still out at the stop" in text
    assert took < 15
