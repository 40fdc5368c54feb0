"""The Internet checksum both DPDK engines use (native/include/perfkit/csum.h: sum16 takes
8 bytes a step, then 2, then the odd byte), driven from C under ASan/UBSan and checked
against RFC 1071 computed in Python: every length 0..80 and start alignment 0..7, random
frames up to 9018 bytes, initial sums as the pseudo headers give them."""
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the checksum driver")
    exe = tmp_path_factory.mktemp("csum") / "csum_driver"
    subprocess.run([cc, "-O2", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(ROOT / "native/include"), str(ROOT / "tests/native/csum_driver.c"),
                    "-o", str(exe)], check=True)
    return exe


def rfc1071_fold(data: bytes, init: int) -> int:
    """sum16's folded result: 16-bit words as they lie in memory (little-endian here), an odd
    last byte as the low byte of a word, plus init, folded to 16 bits (0 only for a zero sum)."""
    if len(data) % 2:
        data += b"\0"
    s = init + sum(struct.unpack(f"<{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def test_sum16_matches_rfc1071_at_every_length_and_alignment(driver):
    rnd = random.Random(31)
    cases = [(bytes(rnd.getrandbits(8) for _ in range(off + n)), off, rnd.choice([0, 1, 0xFFFF, rnd.getrandbits(20)]))
             for n in range(81) for off in range(8)]
    cases += [(bytes(rnd.getrandbits(8) for _ in range(n)), 0, rnd.getrandbits(24))
              for n in (1400, 1460, 1514, 4096, 9018)]
    cases += [(b"\xff" * n, 0, 0) for n in (8, 64, 9000)] + [(b"\0" * 64, 0, 0)]
    blob = b"".join(struct.pack("<IIQ", len(d), off, init) + d for d, off, init in cases)
    out = subprocess.run([str(driver)], input=blob, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    got = [int(x) for x in out.stdout.split()]
    assert got == [rfc1071_fold(d[off:], init) for d, off, init in cases]
