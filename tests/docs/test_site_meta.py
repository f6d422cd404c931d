"""The project's home is named once, the same way, in the package metadata and on the site."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs(key: str) -> str:
    # Read the top-level key as text: the file's other values carry YAML tags for mkdocs.
    found = re.search(rf"^{key}:\s*(\S+)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert found, f"mkdocs.yml: no top-level {key}"
    return found[1]


def test_the_site_and_the_package_name_the_same_home() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    site, repo = _mkdocs("site_url"), _mkdocs("repo_url")
    # A trailing slash: the sitemap and canonical links are built by appending page paths.
    assert site.endswith("/"), "mkdocs.yml: site_url must end with '/'"
    assert urls["Documentation"] == site
    assert urls["Source"] == urls["Homepage"] == repo
    assert urls["Issues"] == f"{repo}/issues"
    assert urls["Changelog"] == f"{site}changelog/"
    assert (ROOT / "docs" / "changelog.md").is_file(), "the Changelog URL's page"
    assert all(url.startswith("https://") for url in urls.values()), urls


def test_the_openlineage_facets_name_the_same_home() -> None:
    """The facet's producer and schema URLs are built from the repository's owner/name."""
    text = (ROOT / "airflow_provider_jobset/openlineage.py").read_text()
    found = re.search(r'^_REPO = "([^"]+)"$', text, re.MULTILINE)
    assert found, "airflow_provider_jobset/openlineage.py: no _REPO"
    source = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    assert source == f"https://github.com/{found[1]}"
