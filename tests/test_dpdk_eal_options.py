"""EAL's typed options (issue 5: cores, memory, hugepages or --no-huge, PMD directory, log
level): the PMD directory (EAL's -d), checked in Python, reaching EAL in a process of its own
(EAL starts once per process)."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                                            "pkg-config, then reinstall perfkit)")
from perfkit.engines.dpdk import EalOptions  # noqa: E402


@pytest.mark.parametrize("bad", ["/nonexistent/pmds", "-d", "", __file__])
def test_a_bad_pmd_dir_names_the_field(bad):
    with pytest.raises(ValueError, match="^pmd_dir:"):
        EalOptions(pmd_dir=bad)


def test_the_pmd_dir_is_eals_d(tmp_path):
    opts = EalOptions(pmd_dir=str(tmp_path), hugepages=False)
    args = opts.args()
    assert args[args.index("-d") + 1] == str(tmp_path)
    assert "-d" not in EalOptions(hugepages=False).args()


def test_eal_loads_the_plugins_of_the_pmd_dir(tmp_path):
    # a directory with one plugin: a link to the net_null PMD (the same file EAL autoloads, so
    # it is not registered twice); EAL says it opened it (a debug line: log_level reaches every
    # log type, not only the global level), and a net_null port works
    found = sorted(glob.glob("/usr/lib/*/dpdk/pmds-*/librte_net_null.so.*"))
    if not found:
        pytest.skip("no net_null PMD plugin found under /usr/lib/*/dpdk/pmds-*")
    link = tmp_path / "librte_net_null_again.so"
    os.symlink(found[0], link)
    code = textwrap.dedent(f"""
        import time
        from perfkit.engines import dpdk
        dpdk.configure(pmd_dir={str(tmp_path)!r}, log_level="debug", hugepages=False)
        dpdk.eal()
        from perfkit import _dpdk
        p = _dpdk.Port("net_null0")
        assert p.send([bytes(60)] * 8) == 8
        p.close()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
    assert f"open shared lib {link}" in out.stderr


def test_the_cli_takes_pmd_dir(tmp_path):
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "net_null0", "-t", "0.2s",
                          "--pmd-dir", str(tmp_path), "--hugepages", "off", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "net_null0", "-t", "0.2s",
                          "--pmd-dir", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("perfkit: pmd_dir:") and len(bad.stderr.splitlines()) == 1
