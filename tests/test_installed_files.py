"""The installed package holds every module of the source tree: meson installs only the files
perfkit/meson.build lists, and a module left off that list imports from the source folder
in a checkout but is missing everywhere else."""
from __future__ import annotations

from pathlib import Path

import perfkit

SOURCE = Path(__file__).resolve().parent.parent / "perfkit"


def test_every_source_module_is_installed():
    installed = Path(perfkit.__file__).resolve().parent
    if installed == SOURCE.resolve():
        import pytest
        pytest.skip("perfkit imported from the source folder, not an installed copy")
    missing = sorted(str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*.py")
                     if not (installed / p.relative_to(SOURCE)).exists())
    assert not missing, f"in perfkit/ but not installed (add them to perfkit/meson.build): {missing}"
