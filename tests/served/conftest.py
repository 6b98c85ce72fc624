"""The served tests of one family-config run back to back (the render test, then its bad-request
table): both read one server's record, cached per process, so splitting them between xdist
workers would start that server twice."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    served = [i for i, item in enumerate(items) if Path(str(item.path)).parent == HERE and hasattr(item, "callspec")]
    if not served:
        return
    ordered = sorted((items[i] for i in served), key=lambda item: (item.callspec.id, item.path.name))
    for slot, item in zip(served, ordered):
        items[slot] = item
