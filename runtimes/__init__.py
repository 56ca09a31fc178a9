"""edgekit's device side: load a .tflite file with the best interpreter and delegate here.

Imports numpy and a TFLite interpreter only, never TensorFlow::

    from edgekit.runtimes import load_model, Delegate

    with load_model("model.tflite", delegate=Delegate.AUTO) as model:
        print(model.inputs[0])            # TensorSpec(name=..., shape=(1, 224, 224, 3), dtype=uint8, ...)
        scores = model.run(image)[0]      # float in, float out; quantized by the model's own parameters
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit._lazy import exported_names, load_export

# Names load with their module when first used (PEP 562), as in edgekit/__init__.py: the CLI asks
# edgekit.runtimes.native_log or .isolation a question before it knows whether a model will load
# at all (`edgekit --version` imports neither numpy nor an interpreter).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Backend", "available_backends", "resolve_backend"), "edgekit.runtimes.backends"),
    **dict.fromkeys(("Delegate", "EdgeTPUDevice", "edgetpu_library_name"), "edgekit.runtimes.delegates"),
    "read_metadata": "edgekit.runtimes.metadata",
    "load_model": "edgekit.runtimes.loader",
    "Model": "edgekit.runtimes.model",
    **dict.fromkeys(("ModelInfo", "TensorSpec", "inspect_model"), "edgekit.runtimes.tensors"),
    **dict.fromkeys(("TFLiteFile", "parse_tflite"), "edgekit.runtimes.tflite_file"),
    "validate_model_file": "edgekit.runtimes.validate",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from edgekit.runtimes.backends import Backend, available_backends, resolve_backend
    from edgekit.runtimes.delegates import Delegate, EdgeTPUDevice, edgetpu_library_name
    from edgekit.runtimes.loader import load_model
    from edgekit.runtimes.metadata import read_metadata
    from edgekit.runtimes.model import Model
    from edgekit.runtimes.tensors import ModelInfo, TensorSpec, inspect_model
    from edgekit.runtimes.tflite_file import TFLiteFile, parse_tflite
    from edgekit.runtimes.validate import validate_model_file


def __getattr__(name: str) -> Any:
    # an unlisted name may be a submodule not imported yet (`edgekit.runtimes.loader` after `import edgekit.runtimes`)
    return load_export(__name__, _EXPORTS, globals(), name, submodules=True)


def __dir__() -> list[str]:
    return exported_names(globals(), __all__)


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
