"""Tiny Keras models and synthetic image data for the converter tests (built once per session).

The classifier learns four synthetic shapes (horizontal bar, vertical bar, filled square,
cross) on 32x32 RGB images in a few seconds; it starts with Rescaling(1/255), so the
converter must infer that the device feeds raw pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

CLASSES = ("hbar", "vbar", "square", "cross")
SIZE = 32


def shapes(n: int, seed: int, size: int = SIZE) -> tuple[np.ndarray, np.ndarray]:
    """n uint8 RGB images (n, size, size, 3) of the four shapes on noisy backgrounds, and their classes."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 60, (n, size, size, 3)).astype(np.int32)
    y = rng.integers(0, len(CLASSES), n)
    for img, cls in zip(x, y):
        color = rng.integers(150, 256, 3)
        c = rng.integers(size // 4, 3 * size // 4, 2)
        half, thick = size // 4, max(2, size // 10)
        r0, r1, c0, c1 = c[0] - half, c[0] + half, c[1] - half, c[1] + half
        if cls == 0:
            img[c[0] - thick // 2:c[0] + thick // 2 + 1, max(c0, 0):c1] = color
        elif cls == 1:
            img[max(r0, 0):r1, c[1] - thick // 2:c[1] + thick // 2 + 1] = color
        elif cls == 2:
            img[max(r0 + 3, 0):r1 - 3, max(c0 + 3, 0):c1 - 3] = color
        else:
            for d in range(-half, half):
                for t in range(-(thick // 2), thick // 2 + 1):
                    for rr, cc in ((c[0] + d, c[1] + d + t), (c[0] + d, c[1] - d + t)):
                        if 0 <= rr < size and 0 <= cc < size:
                            img[rr, cc] = color
    return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)


def classifier(seed: int = 0, epochs: int = 4) -> tuple[Any, float]:
    """A small CNN trained on synthetic shapes; returns (model, held-out accuracy)."""
    import keras

    keras.utils.set_random_seed(seed)
    x, y = shapes(1200, seed=seed)
    inp = keras.Input((SIZE, SIZE, 3), name="image")
    h = keras.layers.Rescaling(1 / 255.0, name="rescale")(inp)
    h = keras.layers.Conv2D(16, 3, activation="relu", name="conv1")(h)
    h = keras.layers.MaxPooling2D(name="pool1")(h)
    h = keras.layers.Conv2D(24, 3, activation="relu", name="conv2")(h)
    h = keras.layers.MaxPooling2D(name="pool2")(h)
    h = keras.layers.Conv2D(32, 3, activation="relu", name="conv3")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    out = keras.layers.Dense(len(CLASSES), activation="softmax", name="probs")(h)
    model = keras.Model(inp, out, name="shapes_cnn")
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x[:1000], y[:1000], epochs=epochs, batch_size=32, verbose=0)
    acc = float(np.mean(model.predict(x[1000:], verbose=0).argmax(1) == y[1000:]))
    return model, acc


def write_image_folder(root: Path, per_class: int, seed: int) -> Path:
    """PNG files in one sub-folder per class (recursive: every other image one level deeper)."""
    from PIL import Image

    x, y = shapes(per_class * len(CLASSES) * 2, seed=seed)
    counts = dict.fromkeys(range(len(CLASSES)), 0)
    for i, (img, cls) in enumerate(zip(x, y)):
        if counts[int(cls)] >= per_class:
            continue
        counts[int(cls)] += 1
        folder = root / CLASSES[cls] / ("more" if i % 2 else "")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(folder / f"{i:04d}.png")
    return root


def yolo_head(seed: int = 0, classes: int = 3) -> Any:
    """An untrained tiny YOLO-like detector: (32, 32, 3) -> raw [1, 64, 5 + classes] (YOLOv5 layout)."""
    import keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input((SIZE, SIZE, 3), name="image")
    h = keras.layers.Rescaling(1 / 255.0)(inp)
    h = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(5 + classes, 3, strides=2, padding="same")(h)
    boxes = keras.layers.Reshape((64, 5 + classes))(h)
    xy = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., :2]) * SIZE, output_shape=(64, 2))(boxes)
    wh = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., 2:4]) * SIZE / 2, output_shape=(64, 2))(boxes)
    scores = keras.layers.Lambda(lambda t: t[..., 4:], output_shape=(64, 1 + classes))(boxes)
    conf = keras.layers.Activation("sigmoid")(scores)
    out = keras.layers.Concatenate(axis=-1)([xy, wh, conf])
    return keras.Model(inp, out, name="tiny_yolo")


def with_weight_outlier(model: Any) -> Any:
    """The classifier with one dead feature (always 0) whose classifier weights are huge.

    The float model computes exactly the same; int8 weights of the last layer get a scale
    set by the outlier and every real weight rounds to 0, so int8 predicts one class. Kept
    in float, that one layer is exact again: the case --auto-fallback exists for.
    """
    import keras

    conv3, probs = model.get_layer("conv3"), model.get_layer("probs")
    k3, b3 = conv3.get_weights()
    kd, bd = probs.get_weights()
    inp = keras.Input(model.input_shape[1:], name="image")
    h = inp
    for name in ("rescale", "conv1", "pool1", "conv2", "pool2"):
        h = model.get_layer(name)(h)
    new3 = keras.layers.Conv2D(k3.shape[-1] + 1, 3, activation="relu", name="conv3w")
    h = keras.layers.GlobalAveragePooling2D(name="gapw")(new3(h))
    dense = keras.layers.Dense(kd.shape[-1], activation="softmax", name="probsw")
    out = dense(h)
    dead_kernel = np.zeros(k3.shape[:-1] + (1,), k3.dtype)
    new3.set_weights([np.concatenate([k3, dead_kernel], -1), np.concatenate([b3, [-1.0]]).astype(b3.dtype)])
    dense.set_weights([np.concatenate([kd, np.full((1, kd.shape[-1]), 1000.0, kd.dtype)]), bd])
    return keras.Model(inp, out, name="shapes_cnn_outlier")
