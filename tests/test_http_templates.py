"""Request templates: method, a URL list (cycled or random), headers and a body,
checked against what nginx logs for every request."""
import collections
import json
import subprocess
import sys

import pytest

import perfkit
from perfkit.spec import HttpLoad

from _nginx import Nginx, needs_nginx  # noqa: E402


def test_spec_validates_url_lists_and_templates():
    a, b = "http://127.0.0.1:8080/a", "http://127.0.0.1:8080/b?x=1"
    s = HttpLoad(url=[a, b], method="POST", body="hi", headers={"X-Perfkit": "t"})
    assert s.urls == [a, b] and s.target() == ("127.0.0.1", 8080)
    req = s.request_bytes()
    assert req.count(b"POST ") == 2 and b"POST /b?x=1 HTTP/1.1\r\n" in req and req.count(b"Content-Length: 2\r\n") == 2
    assert HttpLoad(url=[a]).url == a                      # a list of one is that URL
    assert HttpLoad(url=a, rate="50k").rate.value == 50_000  # requests/s, as the docstring says
    assert HttpLoad.from_dict(s.to_dict()) == s
    assert b"Host: h\r\n" in HttpLoad(url=a, headers={"host": "h"}).request_bytes().replace(b"host", b"Host")
    assert HttpLoad(url=a, headers={"host": "h"}).request_bytes().count(b"127.0.0.1") == 0
    for kw, msg in [({"url": [a, "http://127.0.0.2:8080/"]}, "one server"),
                    ({"url": [a, "http://127.0.0.1:8081/"]}, "one server"),
                    ({"url": []}, "1..10000 URLs"),
                    ({"url": "http://127.0.0.1/a b"}, "spaces"),
                    ({"url_order": "shuffle"}, "url_order"),
                    ({"headers": {"Content-Length": "5"}}, "set from the body"),
                    ({"headers": {"X": "a\r\nb"}}, "not a valid header"),
                    ({"method": "PATCH"}, "method")]:
        with pytest.raises(ValueError, match=msg):
            HttpLoad(**{"url": a, **kw})


@needs_nginx
@pytest.mark.parametrize("order", ["cycle", "random"])
def test_counts_per_url_equal_nginx_access_log(tmp_path, order):
    paths = ["/a", "/b/c", "/d?q=1", "/e"]
    with Nginx(tmp_path) as ngx:
        urls = [f"http://127.0.0.1:{ngx.port}{p}" for p in paths]
        run = perfkit.run(HttpLoad(url=urls, url_order=order, users=8, duration=1, method="POST",
                                   body="x" * 300, headers={"X-Perfkit": f"tmpl-{order}"}))
    s, log = run.summary, ngx.log()
    assert run.error is None and s["responses"] > 200 and s["http_err"] == 0
    per = {u["url"]: u for u in s["per_url"]}
    assert sum(u["requests"] for u in per.values()) == s["requests"]
    assert sum(u["responses"] for u in per.values()) == s["responses"]
    # every request nginx saw is the template's: method, header, body length
    assert {(m, cl, x) for m, _, _, cl, x, *_ in log} == {("POST", "300", f"tmpl-{order}")}
    logged = collections.Counter(uri for _, uri, *_ in log)
    assert s["responses"] == s["requests"] and s["http_cut"] == 0  # the ones out at the end were answered
    for p in paths:  # exactly
        assert logged[p.split("?")[0]] == per[f"http://127.0.0.1:{ngx.port}{p}"]["requests"], (p, logged, per)
    counts = [per[u]["requests"] for u in urls]
    if order == "cycle":  # in turn: no URL more than one ahead of another
        assert max(counts) - min(counts) <= 1
    else:  # uniform at random: each near a quarter, yet not in lockstep
        assert all(abs(c - s["requests"] / 4) < 5 * (s["requests"] / 4) ** 0.5 + 5 for c in counts)


@needs_nginx
def test_cli_url_file_method_header_data(tmp_path):
    with Nginx(tmp_path) as ngx:
        f = tmp_path / "urls.txt"
        f.write_text(f"# two paths\nhttp://127.0.0.1:{ngx.port}/one\n\nhttp://127.0.0.1:{ngx.port}/two\n")
        out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", "--url-file", str(f), "-u", "2",
                              "-t", "1", "-X", "PUT", "-H", "X-Perfkit: cli", "--data", "abc", "--close",
                              "--threads", "2", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout.splitlines()[-1])["summary"]
    log = ngx.log()
    assert len(s["cpu_pct_by_worker"]) == 2  # --threads 2
    assert s["responses"] > 20 and [u["requests"] for u in s["per_url"]] == [
        sum(1 for ln in log if ln[1] == p) for p in ("/one", "/two")]
    assert {(m, cl, x) for m, _, _, cl, x, *_ in log} == {("PUT", "3", "cli")}
    bad = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", "-u", "2"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "url-file" in bad.stderr and bad.stderr.count("\n") == 1


def _hard_nofile():
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return float("inf") if hard == resource.RLIM_INFINITY else hard


@needs_nginx
@pytest.mark.skipif(_hard_nofile() < 9200, reason="the open-file hard limit is below 9000 users")
def test_many_users_to_loopback_spread_over_source_addresses(tmp_path):
    """Past 8192 users to loopback, users bind 127.0.0.1, .2, ...: Linux's connect()
    would otherwise search ~14k same-parity ports per call once they fill up."""
    users = 9000
    with Nginx(tmp_path) as ngx:
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{ngx.port}/", users=users, duration=3, ramp="1s",
                                 think="1s", headers={"X-Perfkit": "spread"})).summary
        log = ngx.log()
    assert s["sock_open"] == users and s["http_err"] == 0 and s["responses"] >= users
    by_src = collections.Counter(ln[6] for ln in log)
    assert set(by_src) == {"127.0.0.1", "127.0.0.2"}
    assert sum(by_src.values()) == s["requests"]
    # users 0..8191 from .1, the other 808 from .2: requests in about that share
    assert by_src["127.0.0.2"] / s["requests"] == pytest.approx((users - 8192) / users, abs=0.03)


@needs_nginx
def test_threads_split_users_and_rate(tmp_path):
    with Nginx(tmp_path) as ngx:
        urls = [f"http://127.0.0.1:{ngx.port}/t{i}" for i in range(3)]
        run = perfkit.run(HttpLoad(url=urls, users=9, threads=2, duration=1))
        s, log = run.summary, ngx.log()
        paced = perfkit.run(HttpLoad(url=urls[0], users=8, threads=2, duration=2, rate=600)).summary
    assert run.roles == ["http_client", "http_client"] and len(s["cpu_pct_by_worker"]) == 2
    assert s["sock_open"] == 9 and s["vusers"] == 9 and s["http_err"] == 0 and s["responses"] > 100
    logged = collections.Counter(ln[1] for ln in log)
    assert [u["requests"] for u in s["per_url"]] == [logged[f"/t{i}"] for i in range(3)]  # summed over threads
    assert paced["requests"] == pytest.approx(1200, rel=0.02) and paced["sock_open"] <= 8
    with pytest.raises(ValueError, match="threads"):
        HttpLoad(users=2, threads=3)
