"""Fixtures of the reference tests: MediaPipe's wheel files, extracted once a session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reference import _mediapipe as ref


@pytest.fixture(scope="session")
def mp() -> Any:
    module, why = ref.mediapipe_or_reason()
    if module is None:
        pytest.skip(why)
    return module


@pytest.fixture(scope="session")
def mp_models(mp: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return ref.extract_models(mp, tmp_path_factory.mktemp("mediapipe_models"))


@pytest.fixture(scope="session")
def photos() -> list[Path]:
    return ref.photos()
