"""The built documentation site browses from disk: opened as ``file://…/site/index.html`` in
headless Chromium (the dashboard test's browser), every navigation link leads to a page file,
and following one shows that page — not a directory listing.

The site is the one at ``$CROWDBUDGET_DOCS_SITE`` (CI builds it with ``mkdocs build --strict``
and points this test at it), else built here into a temporary folder, which needs the docs
extras (``pip install -e '.[docs]'``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from test_service import CHROMIUM_FLAGS, _browser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("CROWDBUDGET_DOCS_SITE")
    if given:
        return Path(given)
    pytest.importorskip("mkdocs", reason="building the site needs pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="building the site needs pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


def _dom(browser: str, url: str, profile: Path) -> str:
    done = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_docs_site_navigates_from_file_urls(site: Path, tmp_path: Path) -> None:
    browser = _browser()
    index = (site / "index.html").resolve().as_uri()
    dom = _dom(browser, index, tmp_path / "profile")
    links = {
        urljoin(index, href)
        for href in re.findall(r'class="md-nav__link[^"]*"[^>]*href="([^"#]+)"', dom)
        + re.findall(r'href="([^"#]+)"[^>]*class="md-nav__link', dom)
    }
    pages = sorted(link for link in links if link.startswith("file://"))
    assert len(pages) >= 10, pages  # every page of the nav
    for link in pages:
        target = Path(urlparse(link).path)
        assert target.is_file(), f"{link}: a directory link, which file:// shows as a listing"
    (cli,) = [link for link in pages if link.endswith("/cli.html")]
    page = _dom(browser, cli, tmp_path / "profile")
    assert "<h1" in page and "Command line" in page and "crowdbudget compare" in page
    assert "Index of" not in page


def _hooks() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_lists_every_action_with_its_options() -> None:
    reference = _hooks()._cli_reference()  # type: ignore[attr-defined]
    for action in ("sync", "serve-webhook", "export"):
        assert f"## crowdbudget labelstudio {action}\n" in reference, action
    sync = reference.split("## crowdbudget labelstudio sync\n", 1)[1].split("\n## ", 1)[0]
    assert "--open-slots" in sync and "--webhook-listen" in sync and "examples:" in sync


def test_api_page_covers_the_names_a_program_reaches_for() -> None:
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in (
        "crowdbudget.aggregation.registry.make_aggregator",
        "crowdbudget.client.Client",
        "crowdbudget.registry.register_policy",
    ):
        assert f"::: {name}\n" in api, name


def test_docs_list_reproductions_with_the_command_and_date_hu_frazier_2016() -> None:
    reproductions = (ROOT / "docs" / "reproductions.md").read_text(encoding="utf-8")
    assert "crowdbudget reproduce --list" in reproductions
    assert "python -c" not in reproductions.split("\n## ", 1)[0]  # the ids: the command lists
    pages = [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]
    pages += sorted((ROOT / "src" / "crowdbudget").rglob("*.py"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        # AISTATS 2016 (PMLR 51): "Hu & Frazier (2016)", "Hu, Frazier (2016)", "Hu & Frazier 2016"
        dated = re.findall(r"Hu\W{1,3}(?:P\. I\. )?Frazier\W{0,3}(20\d\d)", text)
        assert set(dated) <= {"2016"}, (page, dated)
