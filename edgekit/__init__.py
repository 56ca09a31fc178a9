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

from edgekit._lazy import exported_names, load_export

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the console script's start-up)
if TYPE_CHECKING:
    from typing import Any

# Names are imported when first used (PEP 562), so `import edgekit.runtimes` or
# `import edgekit.contract` loads numpy and the interpreter alone: no OpenCV, no video loop.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("AccuracyGateError", "BackendError", "ConfigError", "ConversionError", "DelegateError",
                     "EdgekitError", "InputError", "ModelError", "SourceError"), "edgekit.errors"),
    "load_labels": "edgekit.labels",
    **dict.fromkeys(("Normalization", "ResizeMode", "Transform"), "edgekit.contract.spec"),
    **dict.fromkeys(("fit", "fit_into", "load_image", "to_input"), "edgekit.preprocess"),
    **dict.fromkeys(("Classes", "Classification", "Detection", "Detections", "FrameResult", "Pose", "Poses",
                     "Region", "Segmentation"), "edgekit.results"),
    "draw": "edgekit.drawing",
    **dict.fromkeys(("Delegate", "Model", "ModelInfo", "TensorSpec", "inspect_model", "load_model"),
                    "edgekit.runtimes"),
    **dict.fromkeys(("Classifier", "ClassifierOptions", "Detector", "DetectorOptions"), "edgekit.tasks"),
    **dict.fromkeys(("PoseEstimator", "PoseEstimatorOptions", "Segmenter", "SegmenterOptions"),
                    "edgekit.tasks_vision"),
}
_EXPORTS["ResizeMode"] = "edgekit.contract.enums"

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from edgekit.contract.enums import ResizeMode
    from edgekit.contract.spec import Normalization, Transform
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
    from edgekit.preprocess import fit, fit_into, load_image, to_input
    from edgekit.drawing import draw
    from edgekit.results import Classes, Classification, Detection, Detections, FrameResult, Pose, Poses, Region, Segmentation
    from edgekit.runtimes import Delegate, Model, ModelInfo, TensorSpec, inspect_model, load_model
    from edgekit.tasks import Classifier, ClassifierOptions, Detector, DetectorOptions
    from edgekit.tasks_vision import PoseEstimator, PoseEstimatorOptions, Segmenter, SegmenterOptions


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name)


def __dir__() -> list[str]:
    return exported_names(globals(), __all__)


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
    "Pose",
    "PoseEstimator",
    "PoseEstimatorOptions",
    "Poses",
    "Region",
    "ResizeMode",
    "Segmentation",
    "Segmenter",
    "SegmenterOptions",
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
