"""Fixtures of the backend tests."""

from __future__ import annotations

import pytest

from .backend_helpers import build_checkpoints


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """Three tiny random checkpoints at steps 0, 1000 and 2000."""
    return build_checkpoints(tmp_path_factory.mktemp("ckpt"))
