"""Training the demo detector: grid-cell targets, the loss, the fit loop and evaluation.

Targets (YOLOv5-like, anchor-free): an object goes to the stride-8 head when its longer side is at
most ``SMALL_OBJECT`` of the image, else to the stride-16 head; there it is assigned to the cell
holding its centre plus the nearer horizontal and vertical neighbour (3 positive cells, which triples
the positives and speeds training). Where objects compete for a cell the smaller one wins.

Loss: objectness BCE over all cells, and on the positive cells class BCE, 2 x (1 - GIoU) and
0.5 x L1 (in stride-8 cells) of the decoded box; each summed and divided by the number of positives.
Training runs a fixed number of optimizer steps (``TrainConfig.steps``, or whole epochs), so it gives the same
model on any machine, sooner or later; its learning rate follows a warm-up + cosine schedule over those steps.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from edgekit.demo.dataset import CLASS_NAMES, Sample, load_split
from edgekit.demo.metrics import APResult, mean_average_precision
from edgekit.demo.model import (SMALL_OBJECT, DetectorConfig, build_heads, build_model,
                                decode_constants, predict, require_keras)
from edgekit.errors import InputError

log = logging.getLogger(__name__)

__all__ = ["TrainConfig", "assign_targets", "detection_loss", "train", "evaluate", "evaluate_outputs"]


@dataclass(frozen=True)
class TrainConfig:
    """How to train: steps (or epochs), batch, peak learning rate (cosine decay after a short warm-up),
    width, seed.

    ``steps``: optimizer steps in all (the data is cycled through as often as needed); None: ``epochs``
    whole passes. Either way the result does not depend on the machine. ``time_limit`` (seconds)
    additionally caps training time, the schedule then following whichever runs out first: a
    bound for tests, at the price of a result that depends on the machine's speed (the demo never
    sets it).
    """

    epochs: int = 8
    batch_size: int = 32
    learning_rate: float = 8e-3
    width: int = 32
    seed: int = 0
    steps: int | None = None
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or not self.learning_rate > 0:
            raise InputError(f"epochs and batch_size must be >= 1 and learning_rate > 0, got {self}")
        if self.steps is not None and self.steps < 1:
            raise InputError(f"steps must be >= 1 (or None for whole epochs), got {self.steps}")

    def total_steps(self, num_samples: int) -> int:
        """The optimizer steps training runs on `num_samples` images."""
        return self.steps if self.steps is not None else math.ceil(num_samples / self.batch_size) * self.epochs


def assign_targets(boxes: np.ndarray, class_ids: np.ndarray, cfg: DetectorConfig) -> np.ndarray:
    """Targets [N, 1 + C + 4] for one image: objectness, one-hot class, box xyxy normalised to [0, 1].

    Raises:
        InputError: a class id is outside 0..C-1.
    """
    if len(class_ids) and not 0 <= int(np.min(class_ids)) <= int(np.max(class_ids)) < cfg.num_classes:
        got = sorted(set(np.asarray(class_ids).tolist()))
        raise InputError(f"class ids must be in 0..{cfg.num_classes - 1}, got {got}")
    target = np.zeros((cfg.num_rows, 1 + cfg.num_classes + 4), np.float32)
    norm = np.asarray(boxes, np.float32).reshape(-1, 4) / cfg.input_size
    sides = norm[:, 2:] - norm[:, :2]
    starts = np.cumsum([0, *(g * g for g in cfg.grids)])
    for k in np.argsort(-np.prod(sides, axis=1), kind="stable"):  # large first, so small ones win cells
        head = 0 if sides[k].max() <= SMALL_OBJECT else 1
        grid = cfg.grids[head]
        cx, cy = (norm[k, :2] + norm[k, 2:]) / 2 * grid
        gx, gy = min(int(cx), grid - 1), min(int(cy), grid - 1)
        nx = gx - 1 if cx - gx < 0.5 else gx + 1
        ny = gy - 1 if cy - gy < 0.5 else gy + 1
        for x, y in ((gx, gy), (nx, gy), (gx, ny)):
            if 0 <= x < grid and 0 <= y < grid:
                row = target[starts[head] + y * grid + x]
                row[:] = 0
                row[0], row[1 + int(class_ids[k])] = 1, 1
                row[1 + cfg.num_classes:] = norm[k]
    return target


def detection_loss(cfg: DetectorConfig) -> Any:
    """A Keras loss ``(y_true [B,N,1+C+4], raw [B,N,5+C]) -> scalar`` for :func:`assign_targets` targets."""
    keras = require_keras()
    ops, C = keras.ops, cfg.num_classes
    gain, offset = (g[..., :4] for g in decode_constants(cfg))

    def loss(y_true: Any, raw: Any) -> Any:
        pos = y_true[..., 0]
        npos = ops.maximum(ops.sum(pos), 1.0)
        obj = ops.sum(ops.binary_crossentropy(y_true[..., 0:1], raw[..., 4:5], from_logits=True)) / npos
        cls_bce = ops.binary_crossentropy(y_true[..., 1:1 + C], raw[..., 5:], from_logits=True)
        cls = ops.sum(pos * ops.sum(cls_bce, axis=-1)) / npos
        p = ops.sigmoid(raw[..., :4]) * gain + offset
        pred = ops.concatenate([p[..., :2] - p[..., 2:] / 2, p[..., :2] + p[..., 2:] / 2], axis=-1)
        truth = y_true[..., 1 + C:]
        box = ops.sum(pos * (1 - _giou(ops, pred, truth))) / npos
        # L1 in stride-8 cells: GIoU alone is slow to settle the last pixel on small boxes.
        l1 = ops.sum(pos * ops.sum(ops.abs(pred - truth), axis=-1)) * (cfg.input_size / 8) / npos
        return obj + cls + 2.0 * box + 0.5 * l1

    return loss


def _giou(ops: Any, a: Any, b: Any) -> Any:
    lt, rb = ops.maximum(a[..., :2], b[..., :2]), ops.minimum(a[..., 2:], b[..., 2:])
    inter = ops.prod(ops.relu(rb - lt), axis=-1)
    area_a = ops.prod(ops.relu(a[..., 2:] - a[..., :2]), axis=-1)
    area_b = ops.prod(ops.relu(b[..., 2:] - b[..., :2]), axis=-1)
    union = area_a + area_b - inter + 1e-7
    hull = ops.prod(ops.relu(ops.maximum(a[..., 2:], b[..., 2:]) - ops.minimum(a[..., :2], b[..., :2])), axis=-1)
    return inter / union - (hull - union) / (hull + 1e-7)


def _as_samples(data: str | os.PathLike[str] | Sequence[Sample]) -> list[Sample]:
    samples = load_split(data) if isinstance(data, (str, os.PathLike)) else list(data)
    if not samples:
        raise InputError("no training images: pass a split folder from make_splits() or a list of Samples")
    return samples


def _cosine(progress: float, peak: float) -> float:
    """Learning rate at ``progress`` in [0, 1]: 5% linear warm-up from peak/10, then cosine to peak/50."""
    warm = 0.05
    if progress < warm:
        return peak * (0.1 + 0.9 * progress / warm)
    t = min(1.0, (progress - warm) / (1 - warm))
    return peak * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t)))


def _budget_callback(keras: Any, total_steps: int, config: TrainConfig, show: bool, start: float) -> Any:
    from tqdm.auto import tqdm

    class Budget(keras.callbacks.Callback):
        """Drives the learning rate by progress = steps done / steps in all (or the time used, when a
        time limit is set and further along) and stops at 1. Shows a tqdm bar with the ETA (stderr).
        """

        def on_train_begin(self, logs: Any = None) -> None:
            self.bar = tqdm(total=total_steps, desc="training", unit="step", disable=not show, leave=False,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps "
                                       "[{elapsed}, ETA {remaining}{postfix}]")
            self.start, self.step = start, 0  # time spent preparing counts against the budget too

        def progress(self) -> float:
            done = self.step / total_steps
            if config.time_limit:
                done = max(done, (time.perf_counter() - self.start) / config.time_limit)
            return min(done, 1.0)

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.model.optimizer.learning_rate.assign(_cosine(self.progress(), config.learning_rate))

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step += 1
            self.bar.update(1)
            if logs and "loss" in logs:
                self.bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)
            if self.progress() >= 1.0:
                self.model.stop_training = True

        def on_train_end(self, logs: Any = None) -> None:
            self.bar.close()
            log.info("trained %d of %d steps in %.1f s%s", self.step, total_steps, time.perf_counter() - self.start,
                     " (time limit reached)" if self.step < total_steps else "")

    return Budget()


def train(data: str | os.PathLike[str] | Sequence[Sample], config: TrainConfig = TrainConfig(),
          *, progress: bool = True) -> Any:
    """Train the demo detector on a split folder or a list of samples; returns the batch-1 inference model.

    Runs ``config.steps`` optimizer steps (``config.epochs`` whole epochs when None), or fewer when a
    ``config.time_limit`` runs out first (the learning-rate schedule follows whichever budget is
    further along, so it always finishes decayed).

    Raises:
        InputError: no images, images that are not square or of mixed size, or a bad config.
        ConversionError: TensorFlow/Keras is not installed.
    """
    start = time.perf_counter()
    keras = require_keras()
    samples = _as_samples(data)
    size = samples[0].image.shape[0]
    if any(s.image.shape != (size, size, 3) for s in samples):
        raise InputError(f"every training image must be square RGB of one size like the first ({size}x{size}); "
                         "generate the data at the model's input size")
    cfg = DetectorConfig(num_classes=len(CLASS_NAMES), input_size=size, width=config.width)
    keras.utils.set_random_seed(config.seed)
    x = np.stack([s.image for s in samples])
    y = np.stack([assign_targets(s.boxes, s.class_ids, cfg) for s in samples])
    inp, raw = build_heads(cfg)
    net = keras.Model(inp, raw)
    infer = build_model(cfg.num_classes, size, batch_size=1, width=cfg.width)
    net.set_weights(infer.get_weights())  # same bias initialisation as the inference twin
    total = config.total_steps(len(x))
    epochs = math.ceil(total / math.ceil(len(x) / config.batch_size))  # the callback stops at `total`
    net.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=detection_loss(cfg),
                jit_compile=False)  # XLA is slower for this net on CPU (measured)
    net.fit(x, y, batch_size=config.batch_size, epochs=epochs, shuffle=True, verbose=0,
            callbacks=[_budget_callback(keras, total, config, progress, start)])
    infer.set_weights(net.get_weights())
    return infer


def evaluate_outputs(outputs: Sequence[np.ndarray], samples: Sequence[Sample], threshold: float = 0.01,
                     iou: float = 0.45) -> APResult:
    """mAP@0.5 of raw YOLO outputs (one [N, 5+C] or [1, N, 5+C] per sample) against the samples' boxes.

    Decoded by :func:`edgekit.contract.decode_yolo`, the decoder ``edgekit detect`` uses; the low
    ``threshold`` keeps the low-score tail that average precision needs.

    Raises:
        InputError: the counts differ.
    """
    from edgekit.contract import YoloLayout, decode_yolo
    from edgekit.preprocess import Transform

    if len(outputs) != len(samples):
        raise InputError(f"need one output per sample, got {len(outputs)} outputs for {len(samples)} samples")
    dets = []
    for out, s in zip(outputs, samples):
        h, w = s.image.shape[:2]
        same = Transform((w, h), (w, h), 1.0, 1.0)
        dets.append(decode_yolo(np.asarray(out)[None] if np.ndim(out) == 2 else out, same,
                                layout=YoloLayout.V5, labels=CLASS_NAMES, threshold=threshold,
                                iou_threshold=iou, normalized=True))
    return mean_average_precision(dets, samples, CLASS_NAMES)


def evaluate(model: Any, samples: Sequence[Sample], batch_size: int = 32) -> APResult:
    """mAP@0.5 of a Keras demo detector on samples (e.g. ``load_split(validation)``).

    Raises:
        InputError: the samples do not match the model's input size.
    """
    return evaluate_outputs(list(predict(model, np.stack([s.image for s in samples]), batch_size)), samples)
