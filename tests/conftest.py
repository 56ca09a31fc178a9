"""Shared fixtures: the real models and photos in ../shared (skipped cleanly when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _shared(env: str, name: str) -> Path | None:
    candidates = [os.environ.get(env), ROOT.parent / "shared" / name]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


SHARED_MODELS = _shared("EDGEKIT_TEST_MODELS", "models")
SHARED_IMAGES = _shared("EDGEKIT_TEST_IMAGES", "images")


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if SHARED_MODELS is None:
        pytest.skip("real test models not found: put them in ../shared/models or set EDGEKIT_TEST_MODELS")
    return SHARED_MODELS


@pytest.fixture(scope="session")
def shared_images() -> Path:
    if SHARED_IMAGES is None:
        pytest.skip("real test images not found: put them in ../shared/images or set EDGEKIT_TEST_IMAGES")
    return SHARED_IMAGES


def shared_model(shared_models: Path, name: str) -> Path:
    p = shared_models / name
    if not p.exists():
        pytest.skip(f"{name} not in {shared_models}")
    return p
