"""The trained Ultralytics-style detector, built once per test session (about 40 s on 2 cores)."""

from __future__ import annotations

import importlib.util

import pytest

from tests._yolo_models import TrainedDetector, train_detector


@pytest.fixture(scope="session")
def yolo_detector(tmp_path_factory: pytest.TempPathFactory) -> TrainedDetector:
    missing = [m for m in ("tensorflow", "onnx", "onnxruntime", "onnx2tf", "tf2onnx")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs the convert extra ({', '.join(missing)} missing)")
    return train_detector(tmp_path_factory.mktemp("yolo_detector"))
