"""Signed model releases, staged rollouts with automatic rollback, and fleet status.

Workstation: :func:`~edgekit.fleet.keys.generate_key`, :func:`~edgekit.fleet.release.write_release`
and :func:`~edgekit.fleet.release.set_rollout` (``edgekit keygen``, ``edgekit release``) write an
immutable version folder and a signed ``channel.json`` into a folder any static file server
(or an S3 bucket's HTTPS endpoint) serves. Device: :class:`~edgekit.fleet.follower.FleetFollower`
keeps an inspection cell's versioned model folder on the version the channel selects for it
(``[model] channel = ...`` in the cell's config), and
:class:`~edgekit.fleet.status.StatusPublisher` reports over MQTT what each device runs
(``edgekit fleet status``). The device side needs the standard library, plus ``cryptography``
(the ``fleet`` extra) to check signatures and paho-mqtt for status and notifications.
"""

from __future__ import annotations

__all__ = ["FleetFollower", "FleetSettings", "Trust", "Channel", "ReleaseManifest", "write_release", "set_rollout",
           "generate_key", "load_signing_key", "parse_public_key", "selected", "read_fleet_status"]

_WHERE = {"FleetFollower": "follower", "FleetSettings": "settings", "Trust": "settings", "Channel": "manifest",
          "ReleaseManifest": "manifest", "write_release": "release", "set_rollout": "release",
          "generate_key": "keys", "load_signing_key": "keys", "parse_public_key": "keys", "selected": "manifest",
          "read_fleet_status": "status"}


def __getattr__(name: str) -> object:  # imported when touched: a device loads only what it uses
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"edgekit.fleet.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'edgekit.fleet' has no attribute {name!r}")
