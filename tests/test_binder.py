"""The Binder build, by repo2docker's steps, as a user without root, in a fresh virtual environment.

repo2docker installs binder/apt.txt's packages (as root, first), then runs
`pip install -r binder/requirements.txt` from the repository's root and then binder/postBuild,
both as the notebook user. Here: apt.txt's packages must be installed already (they are
checked, not installed); a copy of the tree owned by `nobody` gets a fresh venv of the system
Python (runtime.txt: 3.11), the requirements (perfkit itself, built by meson, with the
notebook extra) and postBuild, which must import the installed perfkit (`python -P`).

It builds perfkit from scratch and downloads the notebook extra: 76 s alone on the quiet 2-CPU
machine, 332-553 s beside other work. The suite runs it only with PERFKIT_SLOW=1; `.ci/run` runs it
so, beside the suite at idle priority, and fails when it fails or is skipped.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
PYTHON = Path("/usr/bin/python3")

pytestmark = pytest.mark.skipif(os.environ.get("PERFKIT_SLOW") != "1",
                                reason="the Binder build takes 5-9 min: PERFKIT_SLOW=1 runs it")


def _as_user(uid: int) -> list[str]:
    """A command prefix that drops root for uid (nothing when this is not root)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run the build without root")
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _pip_config(work: Path) -> dict:
    """This user's pip configuration (index, certificates), readable by the build's user."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    for conf in (Path.home() / ".config/pip/pip.conf", Path.home() / ".pip/pip.conf"):
        if conf.is_file() and "PIP_CONFIG_FILE" not in env:
            shutil.copy(conf, work / "pip.conf")
            env["PIP_CONFIG_FILE"] = str(work / "pip.conf")
    return env


def test_the_binder_build_as_repo2docker_runs_it():
    if not PYTHON.exists():
        pytest.skip(f"no system Python at {PYTHON}")
    wanted = [ln.split("#")[0].strip() for ln in (BINDER / "apt.txt").read_text().splitlines()]
    missing = [p for p in wanted if p and subprocess.run(["dpkg", "-s", p], capture_output=True).returncode]
    if missing:
        pytest.skip(f"apt.txt's packages are not installed: {' '.join(missing)}")
    uid = 65534 if os.geteuid() == 0 else os.geteuid()   # nobody, as a Binder user has no root
    work = Path(tempfile.mkdtemp(prefix="perfkit-binder-"))
    try:
        repo = work / "repo"
        shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "test-artifacts", "__pycache__", "*.egg-info", ".pytest_cache"))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", **_pip_config(work)}
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{uid}:{uid}", str(work)], check=True)
        drop = _as_user(uid)

        def step(*cmd, path=env["PATH"]):
            out = subprocess.run([*drop, *cmd], cwd=repo, env={**env, "PATH": path}, capture_output=True,
                                 text=True, timeout=1500)
            assert out.returncode == 0, f"{' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
            return out.stdout

        step(str(PYTHON), "-m", "venv", str(work / "venv"))
        venv_path = f"{work / 'venv' / 'bin'}:{env['PATH']}"
        step("pip", "install", "-q", "-r", "binder/requirements.txt", path=venv_path)
        said = step("bash", "binder/postBuild", path=venv_path)
        assert said.startswith("perfkit "), said
        assert "'socket': True" in said, said   # the installed, compiled perfkit, not the source folder
    finally:
        shutil.rmtree(work, ignore_errors=True)
