"""An inspection cell that follows a release channel (``[model] channel`` in its config).

The fleet plugs into the cell through entry points (``edgekit.cell_sections``:
:func:`~edgekit.fleet.settings.parse_fleet`; ``edgekit.cell_followers``: :func:`open_follower`, see
:mod:`edgekit.inspect.plugins`): :mod:`edgekit.inspect` never imports this package.
:func:`open_follower` is what :class:`edgekit.inspect.Cell` calls before it opens its versioned
model folder: the follower recovers from an interrupted update, waits for a first version on a
new device, then follows the channel in the background. It is one of the cell's stages
(:class:`~edgekit.inspect.stage.ModelFollower`): the cell hands it the model watcher's events and
each judged frame (a :class:`~edgekit.inspect.stage.JudgedFrame`, read by :func:`frame_health`)
for the health check on a new version, and closes it after the model folder.
"""

from __future__ import annotations

from typing import Any

from edgekit.fleet.follower import FleetFollower
from edgekit.fleet.health import frame_health
from edgekit.fleet.settings import FleetSettings
from edgekit.inspect.events import EventKind
from edgekit.inspect.stage import StageContext

__all__ = ["open_follower", "frame_health"]


def open_follower(context: StageContext, model_dir: str, isolate: bool | None = None) -> FleetFollower:
    """Start following the channel of the cell's config (``context.config.fleet``) into `model_dir`;
    rollout events go to the cell's events and, with a broker, the status to MQTT. The caller
    closes it (it closes itself when it cannot start).

    Raises:
        ModelError: a new device got no version from the channel in time.
        EdgekitError: cryptography or paho-mqtt is missing.
    """
    config, events = context.config, context.events
    s = config.fleet
    if not isinstance(s, FleetSettings):
        raise TypeError(f"open_follower expects a config with [model] channel, got fleet settings {s!r}")
    follower: FleetFollower | None = None
    publisher = None
    if s.broker is not None:
        from edgekit.fleet.status import StatusPublisher

        publisher = StatusPublisher(s.broker[0], s.broker[1], device=config.device, prefix=s.topic_prefix,
                                    notify_topic=s.notification_topic,
                                    on_notify=lambda payload: follower.notify(payload) if follower else None)
    def on_event(payload: dict[str, Any]) -> None:
        events.emit(EventKind.ROLLOUT, payload)

    follower = FleetFollower(s, device=config.device, model_dir=model_dir, state_dir=config.state_dir,
                             on_event=on_event, publisher=publisher,
                             isolate=isolate is not False)
    try:
        follower.recover()
        follower.ensure_version(timeout=max(60.0, 2 * s.timeout))
        follower.start()
    except BaseException:
        follower.close()
        raise
    return follower
