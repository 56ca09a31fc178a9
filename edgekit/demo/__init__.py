"""The built-in industrial inspection example behind ``edgekit demo``: data, detector, training, accuracy.

Synthetic parts (flange discs, plates, L brackets) ride a conveyor; the labelled classes are
``part``, ``scratch``, ``dent`` and ``missing_hole``. A small YOLO-style Keras detector learns them
in about a minute and a half on two CPU cores, and its .tflite output goes through the same decoder as any
YOLOv5 model (``edgekit.contract``)::

    from edgekit.demo import TrainConfig, evaluate, export_saved, generate, load_split, make_splits, train

    splits = make_splits("demo-data", n_train=4000, n_cal=200, n_val=300, seed=0)
    model = train(splits.train, TrainConfig(steps=1008))           # needs pip install 'edgekit-tflite[convert]'
    print(evaluate(model, load_split(splits.validation)))           # mAP@0.5 0.9.. (part, scratch, ...)
    export_saved(model, "demo-data/detector.keras")

The data side (``generate``, ``make_splits``, ``load_split``, ``make_video``) needs only numpy and
OpenCV; the model side imports TensorFlow when a function is called, never on import.
"""

from __future__ import annotations

from edgekit.demo.conveyor import FrameTruth, PartTruth, VideoTruth, make_video
from edgekit.demo.dataset import CLASS_NAMES, Sample, Splits, generate, load_split, make_splits
from edgekit.demo.metrics import APResult, mean_average_precision
from edgekit.demo.model import (BOX_FORMAT, OUTPUT_FORMAT, DetectorConfig, build_model, export_saved,
                                load_saved, metadata, predict)
from edgekit.demo.train import TrainConfig, evaluate, evaluate_outputs, train

__all__ = [
    "APResult",
    "BOX_FORMAT",
    "CLASS_NAMES",
    "DetectorConfig",
    "FrameTruth",
    "OUTPUT_FORMAT",
    "PartTruth",
    "Sample",
    "Splits",
    "TrainConfig",
    "VideoTruth",
    "build_model",
    "evaluate",
    "evaluate_outputs",
    "export_saved",
    "generate",
    "load_saved",
    "load_split",
    "make_splits",
    "make_video",
    "mean_average_precision",
    "metadata",
    "predict",
    "train",
]
