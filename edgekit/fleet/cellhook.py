"""An inspection cell that follows a release channel (``[model] channel`` in its config).

:func:`open_follower` is what :class:`edgekit.inspect.Cell` calls before it opens its versioned
model folder: the follower recovers from an interrupted update, waits for a first version on a
new device, then follows the channel in the background; the cell hands it the model watcher's
events and each frame's outcome (:func:`frame_health`) for the health check on a new version.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

from edgekit.fleet.follower import FleetFollower

__all__ = ["open_follower", "frame_health"]


def open_follower(config: Any, model_dir: str, events: Any, stack: contextlib.ExitStack,
                  isolate: bool | None = None) -> FleetFollower:
    """Start following ``config.fleet``'s channel into `model_dir`; rollout events go to `events`
    (an EventEmitter) and, with a broker, the status to MQTT. Closed by `stack`.

    Raises:
        ModelError: a new device got no version from the channel in time.
        EdgekitError: cryptography or paho-mqtt is missing.
    """
    from edgekit.inspect.events import EventKind

    s = config.fleet
    follower: FleetFollower | None = None
    publisher = None
    if s.broker is not None:
        from edgekit.fleet.status import StatusPublisher

        publisher = StatusPublisher(s.broker[0], s.broker[1], device=config.device, prefix=s.topic_prefix,
                                    notify_topic=s.notification_topic,
                                    on_notify=lambda payload: follower.notify(payload) if follower else None)
    follower = FleetFollower(s, device=config.device, model_dir=model_dir, state_dir=config.state_dir,
                             on_event=lambda payload: events.emit(EventKind.ROLLOUT, payload), publisher=publisher,
                             isolate=isolate is not False)
    stack.callback(follower.close)
    follower.recover()
    follower.ensure_version(timeout=max(60.0, 2 * s.timeout))
    follower.start()
    return follower


def frame_health(result: Any, decisions: Sequence[Any], parts: Sequence[Any] = ()) -> tuple[float | None, bool | None]:
    """A frame's top score (None: no detection) and whether a verdict failed (None: no verdict).

    ``decisions``: the frame's per-frame decisions; ``parts``: the per-part verdicts it gave (parts that
    crossed the line in it), so a cell judging parts has its FAIL rate watched too."""
    scores = getattr(getattr(result, "detections", None), "scores", None)
    top = float(scores.max()) if scores is not None and len(scores) else None
    passed = [d.verdict.passed for d in decisions if getattr(d, "verdict", None) is not None]
    passed += [p.passed for p in parts]
    return top, (not all(passed) if passed else None)
