"""dperf configuration files that are large, odd or hostile: parsing stays linear, load()
reads regular files of at most 1 MiB, and every refusal is one DperfError line naming the
file (and the line) -- `perfkit dperf -c BAD` prints it and exits 2."""
import gc
import os
import re
import subprocess
import sys
import time

import pytest

from perfkit import dperf

SERVER = "mode server\ncpu 0\nport ring:h:1 198.18.0.2 198.18.0.1\nclient 198.18.0.1 1\nserver 198.18.0.2 1\n"


def address_lines(n: int) -> str:
    """A server configuration of n port, client and server lines (n // 3 each), all different."""
    k = n // 3
    ip = [f"198.18.{i // 250}.{i % 250 + 2}" for i in range(k)]
    return "".join(["mode server\ncpu 0\n",
                    *(f"port ring:p{i}:0 {a} 198.19.0.1\n" for i, a in enumerate(ip)),
                    *(f"client {a} 1\n" for a in ip), *(f"server {a} 1\n" for a in ip)])


def cpu_seconds(text: str) -> float:
    """The least CPU time (of 3) this process spends parsing text: other processes' load
    on the machine does not count, the collector does not run."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(3):
            t = time.process_time()
            dperf.parse(text, source="big.conf")
            best = min(best, time.process_time() - t)
    finally:
        gc.enable()
    return best


def test_address_lines_parse_in_linear_time():
    """4x the lines takes about 4x the work (a check over every earlier line took 16x)."""
    small, big = address_lines(4000), address_lines(16000)
    c = dperf.parse(big, source="big.conf")
    assert len(c.ports) == len(c.clients) == len(c.servers) == 16000 // 3
    assert c.port_lines[-1] == 2 + 16000 // 3 and c.server_lines[-1] == 2 + 16000 // 3 * 3
    ratio = cpu_seconds(big) / max(cpu_seconds(small), 1e-4)
    assert ratio < 8, f"16k lines took {ratio:.1f}x the time of 4k lines: not linear"


def test_a_largest_file_loads_within_a_timeout(tmp_path):
    """A configuration of almost MAX_BYTES of address lines loads (in a process of its own:
    a slow parser fails the timeout instead of stalling the suite)."""
    text, n = address_lines(3), 3
    while len(text) < dperf.MAX_BYTES * 0.95:
        n *= 2
        text = address_lines(n)
    while len(text) > dperf.MAX_BYTES:
        n = n * 9 // 10
        text = address_lines(n)
    conf = tmp_path / "big.conf"
    conf.write_text(text)
    code = "import sys, perfkit.dperf as d; print(len(d.load(sys.argv[1]).servers))"
    p = subprocess.run([sys.executable, "-P", "-c", code, str(conf)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and int(p.stdout) == n // 3, p.stderr


def test_size_limit_names_the_file_and_the_limit(tmp_path):
    conf = tmp_path / "s.conf"
    fill = dperf.MAX_BYTES - len(SERVER) - 1
    conf.write_text(SERVER + "#" * fill + "\n")
    assert os.path.getsize(conf) == dperf.MAX_BYTES and dperf.load(conf).mode == "server"
    conf.write_text(SERVER + "#" * (fill + 1) + "\n")
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(conf))}: 1,048,577 bytes: a dperf configuration is at most 1 MiB$"):
        dperf.load(conf)


def test_a_folder_a_device_and_proc_mem_are_refused(tmp_path):
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(tmp_path))}: a folder, not a dperf configuration file$"):
        dperf.load(tmp_path)
    with pytest.raises(dperf.DperfError, match=r"^/dev/zero: not a regular file"):
        dperf.load("/dev/zero")
    # a regular file to stat, of size 0, whose read fails
    with pytest.raises(dperf.DperfError, match=r"^/proc/self/mem: cannot be read: "):
        dperf.load("/proc/self/mem")
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(tmp_path / 'nope.conf'))}: no such file$"):
        dperf.load(tmp_path / "nope.conf")


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "fifo.conf"
    os.mkfifo(fifo)
    code = "import sys, perfkit.dperf as d\ntry: d.load(sys.argv[1])\nexcept d.DperfError as e: print(e)"
    p = subprocess.run([sys.executable, "-P", "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == f"{fifo}: not a regular file (a device, FIFO or socket): a dperf configuration is a file"


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder", "/proc/self/mem", "big"])
def test_cli_prints_one_line_and_exits_2(tmp_path, special):
    path = {"/dev/zero": "/dev/zero", "/proc/self/mem": "/proc/self/mem", "folder": str(tmp_path)}.get(special)
    if special == "fifo":
        path = str(tmp_path / "fifo.conf")
        os.mkfifo(path)
    elif special == "big":
        path = str(tmp_path / "big.conf")
        with open(path, "wb") as f:
            f.truncate(10 << 20)   # sparse: 10 MiB of NULs
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "dperf", "-c", path], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"perfkit: {path}: "), p.stderr


def test_encoding_errors_name_the_file_and_line(tmp_path):
    conf = tmp_path / "e.conf"
    conf.write_bytes(b"mode server\r\ncpu 0\nport ring:h:1 198.18.0.2 198.18.0.1 \xff\n")
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(conf))}:3: not UTF-8 text \(byte 0xff\)$"):
        dperf.load(conf)
    conf.write_bytes(b"\xc3")   # a sequence cut short by the end of the file
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(conf))}:1: not UTF-8 text \(byte 0xc3\)$"):
        dperf.load(conf)


def test_a_utf8_bom_is_accepted(tmp_path):
    conf = tmp_path / "bom.conf"
    conf.write_bytes(b"\xef\xbb\xbf" + SERVER.encode())
    assert dperf.load(conf) == dperf.parse(SERVER, source=str(conf))
    assert dperf.parse("\ufeff" + SERVER).mode == "server"
    conf.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + SERVER.encode())   # only the first is a BOM
    with pytest.raises(dperf.DperfError, match=rf"^{re.escape(str(conf))}:1: .*unknown keyword"):
        dperf.load(conf)


@pytest.mark.parametrize("line, match", [
    ("cpu 0-4000000000", r"t.conf:2: cpu: '0-4000000000': CPU 4000000000 is above 8191$"),
    ("cpu 0-8191 0", r"t.conf:2: cpu: a CPU is listed twice$"),
    ("cc " + "9" * 400, r"t.conf:2: cc: '9{400}' is too large for a connection count"),
    ("launch_num " + "9" * 400, r"t.conf:2: launch_num: '9{400}' is too large for a launch batch"),
    ("keepalive " + "9" * 400 + "us", r"t.conf:2: keepalive: '9{400}us' is too long an interval"),
    ("duration " + "9" * 400, r"t.conf:2: duration: '9{400}' is too long a duration"),
    ("http_path /" + "a" * 2000, r"t.conf:2: /a{19}\.\.\.: 2,001 characters in one word \(at most 1024\)"),
    ("mode\x1b[31m client", r"t.conf:2: mode\\x1b\[31m: unknown keyword"),
    ("port ring:a\x00:0 198.18.0.3 198.18.0.1\nport ring:a\x00:0 198.18.0.4 198.18.0.1",
     r"t.conf:3: port: ring:a\\x00:0 is on another port line too"),
    ("port ring:b:0 198.18.0.2 198.18.0.1", r"t.conf:4: port: 198.18.0.2 is another port's address too"),
    ("server 2001:2::1 1", r"t.conf:4: port: 198.18.0.2 is IPv4 \(address\) but the configuration's addresses are IPv6"),
])
def test_hostile_values_are_one_printable_error_line(line, match):
    with pytest.raises(dperf.DperfError, match=match) as e:
        dperf.parse("mode client\n" + line + "\n" + SERVER.replace("mode server\n", ""), source="t.conf")
    assert isinstance(e.value, ValueError) and str(e.value).isprintable()
