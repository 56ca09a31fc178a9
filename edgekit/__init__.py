"""edgekit: quantized on-device inference for TFLite models.

Run a detector on a photo, a video file or a camera::

    import edgekit

    with edgekit.Detector.create_from_model_path("detect.tflite") as detector:
        frame = edgekit.load_image("street.jpg")            # RGB uint8, as every edgekit frame
        detections = detector.detect(frame)
        for d in detections:                                 # Detection(id, label, score, box)
            print(d.label, round(d.score, 2), d.box)
        annotated = edgekit.draw(frame, detections)

Or drive the interpreter yourself::

    with edgekit.load_model("model.tflite", delegate=edgekit.Delegate.AUTO) as model:
        print(model.inputs[0], model.backend, model.delegate)
        outputs = model.run(x)                               # float in, float out

The device side never imports TensorFlow; ``edgekit.converters`` (the workstation side) does.
"""

from __future__ import annotations

from edgekit.errors import (
    AccuracyGateError,
    BackendError,
    ConfigError,
    ConversionError,
    DelegateError,
    EdgekitError,
    InputError,
    ModelError,
    SourceError,
)
from edgekit.labels import load_labels
from edgekit.preprocess import Normalization, ResizeMode, Transform, fit, fit_into, load_image, to_input
from edgekit.results import Classes, Classification, Detection, Detections, FrameResult, draw
from edgekit.runtimes import Delegate, Model, ModelInfo, TensorSpec, inspect_model, load_model
from edgekit.tasks import Classifier, ClassifierOptions, Detector, DetectorOptions

__version__ = "0.1.0"

__all__ = [
    "AccuracyGateError",
    "BackendError",
    "Classes",
    "Classification",
    "Classifier",
    "ClassifierOptions",
    "ConfigError",
    "ConversionError",
    "Delegate",
    "DelegateError",
    "Detection",
    "Detections",
    "Detector",
    "DetectorOptions",
    "EdgekitError",
    "FrameResult",
    "InputError",
    "Model",
    "ModelError",
    "ModelInfo",
    "Normalization",
    "ResizeMode",
    "SourceError",
    "TensorSpec",
    "Transform",
    "__version__",
    "draw",
    "fit",
    "fit_into",
    "inspect_model",
    "load_image",
    "load_labels",
    "load_model",
    "to_input",
]
