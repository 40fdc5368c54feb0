"""README's Binder badge and pyproject.toml agree: the badge names the GitHub repository that
[project.urls] Repository names, and without one README shows no badge (no made-up owner),
only how to make it."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BADGE = re.compile(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\((https://mybinder\.org/v2/gh/[\w.-]+/[\w.-]+/[^)\s]*)\)")
QUICKSTART = "?urlpath=lab/tree/notebooks/01-quickstart.ipynb"


def binder_url(repository: str) -> str:
    """The Binder link of a GitHub repository's URL (https://github.com/<account>/<name>)."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    assert m, f"[project.urls] Repository: {repository!r} is not https://github.com/<account>/<name>"
    return f"https://mybinder.org/v2/gh/{m.group(1)}/{m.group(2)}/HEAD{QUICKSTART}"


def test_readmes_binder_badge_is_the_repository_pyproject_names():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("urls", {})
    readme = (ROOT / "README.md").read_text()
    badges = BADGE.findall(readme)
    repository = urls.get("Repository")
    if repository:
        assert badges == [binder_url(repository)], badges
    else:   # not published yet: README says how, with no badge that points nowhere
        assert badges == [], f"a Binder badge but no [project.urls] Repository in pyproject.toml: {badges}"
        assert "[project.urls]" in readme and "mybinder.org/v2/gh/<account>/<name>/HEAD" + QUICKSTART in readme
    assert "OWNER" not in readme


def test_binder_url_of_a_github_repository():
    assert binder_url("https://github.com/acme/perfkit.git") == \
        "https://mybinder.org/v2/gh/acme/perfkit/HEAD" + QUICKSTART
