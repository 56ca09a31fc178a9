"""A .tflite run straight in ai_edge_litert, independent of edgekit: the tests' reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def run_tflite(path: Path, x: np.ndarray) -> np.ndarray:
    """Quantize each sample for the input, invoke, dequantize the output; the outputs stacked."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    i, o = interp.get_input_details()[0], interp.get_output_details()[0]
    outs = []
    for sample in x.astype(np.float32):
        s, z = i["quantization"]
        if s:
            info = np.iinfo(i["dtype"])
            sample = np.clip(np.round(sample / s) + z, info.min, info.max)
        interp.set_tensor(i["index"], sample[None].astype(i["dtype"]))
        interp.invoke()
        q = interp.get_tensor(o["index"])[0]
        s, z = o["quantization"]
        outs.append(q.astype(np.float32) if not s else s * (q.astype(np.int32) - z))
    return np.stack(outs)
