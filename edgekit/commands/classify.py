"""`edgekit classify -m MODEL IMAGE...`: the top-k classes of each image, via :class:`edgekit.Classifier`.

Preprocessing follows the model: its input size, and its edgekit metadata (resize mode,
mean/std, color order) or, without metadata, the conventions of :func:`edgekit.preprocess.to_input`.
Labels: --labels, else the metadata's; a 1000-line file for 1001 outputs gets "background"
put first (see :func:`edgekit.labels.align_labels`); without labels the id is shown.
Scores are the model's output as it is, dequantized: a model whose last layer is not a
softmax gives raw scores (logits), which are reported as they are, not renormalized.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from edgekit.commands._common import DELEGATE_DEFAULT, DELEGATE_HELP, delegate_arg, native_stderr_filtered, positive_int
from edgekit.commands._defaults import FieldDefault
from edgekit.labels import NO_LABELS_NOTE
from edgekit.errors import EdgekitError, InputError
from edgekit.preprocess import load_image
from edgekit.results import Classification
from edgekit.runtimes.loader import default_threads
from edgekit.tasks import Classifier, ClassifierOptions

__all__ = ["register", "run"]


OPTIONS = "edgekit.tasks:ClassifierOptions"  # the flags' defaults are its own


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "classify", help="top-k classes of images with a classification model",
        description="Classify images. Input size and preprocessing come from the model; labels from its "
                    "edgekit metadata or --labels (ids are shown without either). Scores are the model's "
                    "outputs, dequantized; a model without a softmax gives raw scores.",
        formatter_class=HelpFormatter)
    p.add_argument("-m", "--model", required=True, help="the .tflite classification model")
    p.add_argument("--labels", help="labels file (one per line, or 'id label'); overrides the model's labels")
    p.add_argument("-k", "--top-k", type=positive_int, default=FieldDefault(OPTIONS, "top_k"),
                   help="classes to show per image")
    p.add_argument("-t", "--threshold", type=float, default=FieldDefault(OPTIONS, "threshold"),
                   help="hide classes scoring below this")
    p.add_argument("--delegate", type=delegate_arg, default=DELEGATE_DEFAULT, help=DELEGATE_HELP)
    p.add_argument("--threads", type=positive_int, default=str(default_threads()),
                   help="CPU threads (all cores, at most 4)")
    p.add_argument("--json", action="store_true", help="one JSON object per image and line")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files (BMP, JPEG, PNG, WebP, ...)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.threshold >= 0.0:  # also refuses nan
        raise InputError(f"--threshold must be a score of at least 0, got {args.threshold}")
    # No warm-up, as `detect` before images (commands._common.resolve_warmup): one run per image, where
    # warming up would only double the time (two extra inferences of the model at every start).
    options = ClassifierOptions(model=args.model, labels=args.labels, delegate=args.delegate,
                                num_threads=args.threads, top_k=args.top_k, threshold=args.threshold,
                                isolate=getattr(args, "isolate", None), warmup=0)
    with native_stderr_filtered():
        clf = Classifier.create_from_options(options)
    with clf:
        if clf.labels_note:
            print(f"edgekit classify: note: {clf.labels_note}", file=sys.stderr)
        if clf.labels is None:
            print(f"edgekit classify: note: {NO_LABELS_NOTE}", file=sys.stderr)
        failures = 0
        for path in args.images:
            try:
                t0 = time.perf_counter()
                classes = list(clf.classify(load_image(path)))
                ms = (time.perf_counter() - t0) * 1e3
            except EdgekitError as exc:
                failures += 1
                print(f"edgekit classify: error: {exc}", file=sys.stderr)
                continue
            _print(path, classes, ms, args.json)
    return 2 if failures else 0


def _print(path: str, classes: list[Classification], ms: float, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"image": path, "classes": [c._asdict() for c in classes], "ms": round(ms, 3)}),
              flush=True)
        return
    print(path)
    if not classes:
        print("  (no class above the threshold)")
    width = max((len(str(c.id)) for c in classes), default=1)
    for c in classes:
        print(f"  {c.score:7.4f}  {str(c.id).rjust(width)}  {c.label}")
    sys.stdout.flush()
