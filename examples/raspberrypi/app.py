"""An inspection app of your own, with edgekit as a library (what `edgekit inspect` does, in brief).

    python app.py --config inspection.toml --model model.tflite              # the camera in the config
    python app.py --config inspection.toml --model model.tflite --image part.jpg   # one photo, one verdict

It shows the pieces: a Detector from a model file, the config's zones and rules, a PASS/FAIL
per frame or per trigger, and each verdict as a numbered event written to rotating JSON-lines
files. Swap RotatingJsonlSink for MqttSink (edgekit.sinks.mqtt) to publish to a broker.
"""

from __future__ import annotations

import argparse
import json
import sys

from edgekit.inspect.events import EventEmitter, EventKind, SequenceCounter
from edgekit.inspect import Inspector, load_config
from edgekit.preprocess import load_image
from edgekit.sinks.rotating import RotatingConfig, RotatingJsonlSink
from edgekit.tasks import Detector
from edgekit.video import SourceKind, SourceSpec, parse_source


def inspect_image(detector: Detector, inspector: Inspector, path: str) -> dict:
    """One photo -> the verdict of the config's rules on it."""
    detections = detector.detect(load_image(path))  # RGB uint8; boxes come back in its pixels
    verdict = inspector.check(detections.xyxy, detections.labels, detections.scores)
    return {"image": path, **verdict.to_dict()}


def inspect_stream(detector: Detector, inspector: Inspector, events: EventEmitter, source: SourceSpec,
                   max_frames: int | None) -> None:
    """Frames from the camera (or file) -> a decision per frame or trigger -> an event each."""
    for result in detector.stream(source, max_frames=max_frames):
        d = result.detections
        for decision in inspector.process(d.xyxy, d.labels, d.scores, frame=result.index,
                                          captured_at=result.capture_ts):
            if decision.publish:
                event = events.emit(EventKind.INSPECTION, decision.to_payload())
                print(f"#{event.seq} frame {decision.frame}: {decision.to_payload()['verdict']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="inspection TOML (zones, rules, source)")
    parser.add_argument("--model", required=True, help="a detection .tflite (SSD or YOLO)")
    parser.add_argument("--image", help="inspect this one photo and print the verdict as JSON")
    parser.add_argument("--events", default="events", help="folder for the event files")
    parser.add_argument("--max-frames", type=int, help="stop after this many frames")
    args = parser.parse_args(argv)

    config = load_config(args.config)
    with Detector.create_from_model_path(args.model, labels=config.model.labels,
                                         threshold=config.model.threshold) as detector, \
            Inspector.from_config(config) as inspector:
        if detector.labels:
            config.check_labels(detector.labels)  # a misspelt label in a rule fails here, not silently
        if args.image:
            print(json.dumps(inspect_image(detector, inspector, args.image), indent=2))
            return 0
        sink = RotatingJsonlSink(RotatingConfig(args.events))
        with EventEmitter(config.device, SequenceCounter(f"{args.events}/sequence.json"), [sink]) as events:
            s = config.source
            source = SourceSpec(SourceKind.PICAMERA, "picamera2") if s.picamera else \
                parse_source(s.target, width=s.width, height=s.height, fps=s.fps, realtime=s.realtime)
            inspect_stream(detector, inspector, events, source, args.max_frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
