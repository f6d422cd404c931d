"""The core's file cache: an entry read back as written, every failure a miss, a bounded
folder kept to its bound (oldest first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobset_core import filecache


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "jobset-core"


def test_an_entry_reads_back_as_written(home: Path) -> None:
    assert filecache.folder() == home
    assert filecache.read("a/b.json") is None
    filecache.write("a/b.json", {"restarts": 3, "x": [1, None]})
    assert filecache.read("a/b.json") == {"restarts": 3, "x": [1, None]}
    assert sorted(p.name for p in (home / "a").iterdir()) == ["b.json"]  # no scratch left


@pytest.mark.parametrize("content", ["{broken", "", "\xff"])
def test_an_unreadable_entry_is_a_miss(home: Path, content: str) -> None:
    (home / "a").mkdir(parents=True)
    (home / "a" / "b.json").write_text(content, encoding="latin-1")
    assert filecache.read("a/b.json") is None


@pytest.mark.usefixtures("unwritable_cache")
def test_a_folder_that_cannot_be_written_is_a_miss_not_an_error() -> None:
    filecache.write("a/b.json", 1)
    assert filecache.read("a/b.json") is None


def test_a_bounded_folder_keeps_the_newest(home: Path) -> None:
    for i in range(9):
        filecache.write(f"f/{i}.json", i, bounded=4)
        path = home / "f" / f"{i}.json"
        if path.exists():  # a distinct write time per entry, without sleeping
            os.utime(path, (1_000_000 + i, 1_000_000 + i))
    left = sorted(int(p.stem) for p in (home / "f").iterdir())
    assert len(left) <= 4
    assert left[-1] == 8
    assert left == list(range(left[0], 9))  # the oldest went first
