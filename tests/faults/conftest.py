"""The `cluster` fixture: a fresh emulated cluster with the stuck namespace, for each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults._support import Cluster, build_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from build_cluster(tmp_path)
