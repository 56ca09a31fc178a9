"""edgekit: quantized on-device inference for TFLite models.

    import edgekit

    with edgekit.load_model("model.tflite") as model:
        print(model.inputs)
        outputs = model.run(x)
"""

from __future__ import annotations

from edgekit.errors import (
    BackendError,
    ConfigError,
    ConversionError,
    DelegateError,
    EdgekitError,
    InputError,
    ModelError,
    SourceError,
)
from edgekit.runtimes import Delegate, Model, ModelInfo, TensorSpec, inspect_model, load_model

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "ConfigError",
    "ConversionError",
    "Delegate",
    "DelegateError",
    "EdgekitError",
    "InputError",
    "Model",
    "ModelError",
    "ModelInfo",
    "SourceError",
    "TensorSpec",
    "__version__",
    "inspect_model",
    "load_model",
]
