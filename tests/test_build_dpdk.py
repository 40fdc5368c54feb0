"""meson refuses an unusable libdpdk in one line and builds without the DPDK extension.

pkg-config is pointed at a fake libdpdk.pc (first on PKG_CONFIG_PATH): one too old for the
RTE_ETH_* names perfkit uses, one whose headers are not there. `meson setup` of this tree
must say why in one warning and configure the rest; with -Ddpdk=enabled it must stop there.
Only the configure step runs (a few seconds each), in a build folder of the test's own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MESON = Path(sys.executable).with_name("meson")

if not MESON.exists() or shutil.which("pkg-config") is None:
    pytest.skip("needs meson in this environment (the test extra) and pkg-config", allow_module_level=True)
pytest.importorskip("Cython", reason="meson setup of this tree needs Cython (the test extra)")

PC = """prefix={prefix}
Name: DPDK
Description: a fake libdpdk for perfkit's build test
Version: {version}
Libs: -L${{prefix}}/lib
Cflags: -I${{prefix}}/include
"""


def _setup(tmp_path: Path, version: str, *options: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "pc"
    fake.mkdir(exist_ok=True)
    (fake / "libdpdk.pc").write_text(PC.format(prefix=tmp_path / "nodpdk", version=version))
    env = dict(os.environ, PKG_CONFIG_PATH=f"{fake}:{os.environ.get('PKG_CONFIG_PATH', '')}",
               PATH=f"{MESON.parent}:{os.environ['PATH']}")
    build = tmp_path / f"build-{version}-{len(options)}"
    return subprocess.run([str(MESON), "setup", str(build), str(ROOT), *options], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_a_libdpdk_older_than_2111_is_refused_and_the_rest_builds(tmp_path):
    out = _setup(tmp_path, "20.11.0")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if "is unusable" in ln]
    assert len(lines) == 1 and lines[0].endswith(
        "perfkit: libdpdk 20.11.0 is unusable: version 20.11.0 is older than 21.11: building without the DPDK extension")
    assert "building the DPDK extension against" not in out.stdout


def test_a_libdpdk_whose_headers_do_not_compile_is_refused(tmp_path):
    out = _setup(tmp_path, "22.11.0")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "libdpdk compiles and links" in out.stdout
    lines = [ln for ln in out.stdout.splitlines() if "is unusable" in ln]
    assert len(lines) == 1 and "does not compile and link against it" in lines[0], lines
    assert lines[0].endswith("building without the DPDK extension")


def test_dpdk_enabled_makes_an_unusable_libdpdk_an_error(tmp_path):
    out = _setup(tmp_path, "20.11.0", "-Ddpdk=enabled")
    assert out.returncode != 0
    assert "ERROR: Problem encountered: perfkit: libdpdk 20.11.0 is unusable: version 20.11.0 is older than 21.11" \
        in out.stdout + out.stderr
