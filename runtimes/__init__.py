"""edgekit's device side: load a .tflite file with the best interpreter and delegate here.

Imports numpy and a TFLite interpreter only, never TensorFlow::

    from edgekit.runtimes import load_model, Delegate

    with load_model("model.tflite", delegate=Delegate.AUTO) as model:
        print(model.inputs[0])            # TensorSpec(name=..., shape=(1, 224, 224, 3), dtype=uint8, ...)
        scores = model.run(image)[0]      # float in, float out; quantized by the model's own parameters
"""

from __future__ import annotations

from edgekit.runtimes.backends import Backend, available_backends, resolve_backend
from edgekit.runtimes.delegates import Delegate, EdgeTPUDevice, edgetpu_library_name
from edgekit.runtimes.metadata import read_metadata
from edgekit.runtimes.loader import load_model
from edgekit.runtimes.model import Model
from edgekit.runtimes.tensors import ModelInfo, TensorSpec, inspect_model
from edgekit.runtimes.tflite_file import TFLiteFile, parse_tflite
from edgekit.runtimes.validate import validate_model_file

__all__ = [
    "Backend",
    "Delegate",
    "EdgeTPUDevice",
    "Model",
    "ModelInfo",
    "TFLiteFile",
    "TensorSpec",
    "available_backends",
    "edgetpu_library_name",
    "inspect_model",
    "load_model",
    "parse_tflite",
    "read_metadata",
    "resolve_backend",
    "validate_model_file",
]
