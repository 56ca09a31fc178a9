"""The quantizers that turn a source (:mod:`edgekit.converters.sources`) into a .tflite in a mode.

* :mod:`~edgekit.converters.engines.tflite_converter`: TensorFlow's TFLiteConverter (and its
  QuantizationDebugger), for Keras and SavedModel sources;
* :mod:`~edgekit.converters.engines.aiq`: ai-edge-quantizer, for a float .tflite or a per-layer recipe,
  calibrated by TFLiteConverter's rule (:mod:`~edgekit.converters.engines.aiq_ranges`).

Both meet :class:`~edgekit.converters.engines.base.QuantizerEngine`; :func:`default_engine` picks one.
"""

from __future__ import annotations

from edgekit.converters.engines.aiq import AiEdgeQuantizerEngine, default_engine
from edgekit.converters.engines.base import LayerDiagnosis, QuantizerEngine
from edgekit.converters.engines.tflite_converter import TFLiteConverterEngine

__all__ = ["default_engine", "QuantizerEngine", "LayerDiagnosis", "TFLiteConverterEngine", "AiEdgeQuantizerEngine"]
