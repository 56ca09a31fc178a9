"""The inspection config file (TOML), read into dataclasses with errors that name key and line.

``load_config("inspection.toml")`` returns an :class:`InspectionConfig`; a mistake gives
``ConfigError("inspection.toml:27: rules[1].count: expected an integer >= 0, got 'four'")``.
Relative paths are taken from the config file's folder. The file format is documented in
examples/raspberrypi/inspection.toml.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.errors import ConfigError, InputError
from edgekit.inspect.rules import Anchor, Rule, Zone
from edgekit.inspect.sinkconfig import SinksConfig, parse_sinks
from edgekit.inspect.plugins import ChannelSettings, section_parser
from edgekit.inspect.schema import (FRACTION, NONNEG_INT, PORT, POS_INT, POS_NUM, Constraint, Section, Setting, one_of,
                                   setting, written)
from edgekit.inspect.tomlpos import Context, KeyLines, Table
from edgekit.inspect.triggers import PublishMode, TriggerMode
from edgekit.runtimes.delegates import Delegate, DelegateSpec
from edgekit.sinks.mqtt import check_topic_part

if TYPE_CHECKING:
    from edgekit.inspect.dashboard.config import DashboardConfig
    from edgekit.inspect.parts.config import PartsConfig

# Keys of [model] that the release-channel wing reads (edgekit.fleet.settings, an edgekit.cell_sections entry point).
FLEET_MODEL_KEYS = ("channel", "public_key", "trust")

__all__ = ["InspectionConfig", "SourceConfig", "ModelConfig", "TriggerConfig", "MetricsConfig",
           "SinksConfig", "load_config", "parse_config"]

def _is_camera(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (
        isinstance(v, str) and v.startswith("/dev/video"))


@dataclass(frozen=True)
class SourceConfig:
    """Exactly one of camera, path, url, picamera."""

    camera: int | str | None = setting(object, None, Constraint(_is_camera, "a camera index >= 0 or /dev/videoN"))
    path: str | None = setting(str, None, path=True)  # a video file, image, folder or glob
    url: str | None = setting(str, None, Constraint(lambda v: "://" in v, "a URL like rtsp://host/stream"))
    picamera: bool = setting(bool, False)
    width: int | None = setting(int, None, POS_INT)
    height: int | None = setting(int, None, POS_INT)
    fps: float | None = setting(float, None, POS_NUM)
    realtime: bool = setting(bool, False)

    @property
    def target(self) -> str | int:
        """What ``edgekit.sources.parse_source`` takes (picamera: "picamera")."""
        for value in (self.camera, self.path, self.url):
            if value is not None:
                return value
        return "picamera"


@dataclass(frozen=True)
class ModelConfig:
    """A fixed model file, or a versioned folder (dir/1/model.tflite, dir/2/...) watched for updates."""

    path: str | None = setting(str, None, path=True)
    dir: str | None = setting(str, None, path=True)
    delegate: DelegateSpec = setting(str, DelegateSpec(), doc=f"{', '.join(d.value for d in Delegate)} or "
                                     f"{Delegate.EDGETPU.value}:usb:N", convert=lambda v: _delegate(v))
    threads: int | None = setting(int, None, POS_INT)
    labels: str | None = setting(str, None, path=True)
    threshold: float = setting(float, 0.5, FRACTION)
    poll_seconds: float = setting(float, 2.0, POS_NUM)


@dataclass(frozen=True)
class TriggerConfig:
    mode: TriggerMode = setting(TriggerMode, TriggerMode.CONTINUOUS)
    file: str | None = setting(str, None, path=True)  # touch this file to trigger (on-demand)
    http_port: int | None = setting(int, None, PORT)  # POST http://<http_host>:<port>/trigger (on-demand)
    http_host: str = setting(str, "127.0.0.1")
    timeout: float = setting(float, 5.0, POS_NUM)  # how long a trigger waits for a frame captured after it
    publish: PublishMode = setting(PublishMode, PublishMode.EVERY)  # continuous mode: every verdict, or only changes


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = setting(bool, True)  # a [metrics] table turns them on; a file without one has METRICS_OFF
    host: str = setting(str, "127.0.0.1")
    port: int = setting(int, 9100, PORT)


METRICS_OFF = MetricsConfig(enabled=False)

_SOURCE, _TRIGGER, _METRICS = Section(SourceConfig), Section(TriggerConfig), Section(MetricsConfig)
_MODEL = Section(ModelConfig, extra_keys=FLEET_MODEL_KEYS)
_ZONE = Section(None, {"name": Setting(str, doc="a zone name"),
                       "polygon": Setting(list, Constraint(lambda v: _is_polygon(v),
                                                           "an array of at least 3 [x, y] pixel points")),
                       "anchor": Setting(Anchor, default=None)})  # Zone's default
_RULE = Section(None, {"label": Setting(str, doc="the label to count, e.g. 'screw'"),
                       "zone": Setting(str, default=None), "count": Setting(int, NONNEG_INT, default=None),
                       "min": Setting(int, NONNEG_INT, default=None), "max": Setting(int, NONNEG_INT, default=None),
                       "min_score": Setting(float, FRACTION, default=None),
                       "min_area": Setting(float, Constraint(lambda v: v >= 0, "pixels, a number >= 0"), default=None)})


_TABLES = "edgekit.tables"  # InspectionConfig's field metadata: the file's tables of a section that has several


@dataclass(frozen=True)
class InspectionConfig:
    path: str  # the config file itself
    device: str
    state_dir: str
    source: SourceConfig
    model: ModelConfig
    trigger: TriggerConfig = field(default_factory=TriggerConfig)
    zones: tuple[Zone, ...] = ()
    rules: tuple[Rule, ...] = ()
    sinks: SinksConfig = field(default_factory=SinksConfig)
    metrics: MetricsConfig = METRICS_OFF
    parts: PartsConfig | None = field(default=None, metadata={_TABLES: ("parts", "line", "plc")})  # per-part mode
    dashboard: DashboardConfig | None = None  # [dashboard]: the operator's page (edgekit.inspect.dashboard)
    # [model] channel and [fleet]: follow a release channel; the settings of the wing that owns the
    # section (edgekit.fleet's FleetSettings, found through edgekit.inspect.plugins)
    fleet: ChannelSettings | None = None

    def check_labels(self, labels: list[str] | None) -> None:
        """Raises ConfigError when a rule counts a label the model does not have, or when rules
        count labels by name and the model has none (`labels` None or empty)."""
        if not labels:
            if self.rules:
                names = ", ".join(sorted({repr(r.label) for r in self.rules}))
                raise ConfigError(f"{self.path}: the rules count {names} by name, but the model has no labels "
                                  "(none in its metadata) and [model] names no labels file; add "
                                  "labels = \"labels.txt\" (one label per line, line number = class id) to [model]")
            return
        known = set(labels)
        for rule in self.rules:
            if rule.label not in known:
                close = difflib.get_close_matches(rule.label, labels, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else f" The model knows {len(labels)} labels."
                raise ConfigError(f"{rule.where}: rules label {rule.label!r} is not a label of the model.{hint}")

    def check_frame(self, width: int, height: int) -> None:
        """Raises ConfigError when a zone or the counting line reaches outside the frame."""
        for zone in self.zones:
            zone.check_fits(width, height)
        if self.parts is not None:
            self.parts.check_frame(width, height)


def _tables_of(name: str) -> tuple[str, ...]:
    """The file's tables of the section InspectionConfig keeps in its field ``name``."""
    return tuple(InspectionConfig.__dataclass_fields__[name].metadata.get(_TABLES, (name,)))


# The top table's own keys; its tables are the sections InspectionConfig holds (each its field's name,
# or the tables its field declares), and the [model] keys of the release channel's wing are FLEET_MODEL_KEYS.
_OWN = {"device": Setting(str, doc="a device id", default=None), "state_dir": Setting(str, path=True, default=None)}
_TOP = Section(None, _OWN, extra_keys=tuple(table for f in dataclasses.fields(InspectionConfig)
                                            if f.name not in ("path", *_OWN) for table in _tables_of(f.name)))


def _tomllib() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    try:
        import tomli
    except ImportError:
        raise ConfigError("reading TOML on Python 3.10 needs tomli: pip install tomli") from None
    return tomli


def load_config(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> InspectionConfig:
    """Read and check an inspection config file.

    Raises:
        ConfigError: the file is missing, not TOML, or a key is unknown, missing or wrong;
            the message names the file, line and key.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist "
                          "(examples/raspberrypi/inspection.toml is a starting point)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(p)!r}: {exc}") from None
    return parse_config(text, name=str(p), base=p.resolve().parent, env=env)


def parse_config(text: str, *, name: str = "<config>", base: Path | None = None,
                 env: dict[str, str] | None = None) -> InspectionConfig:
    """Like :func:`load_config` for TOML text; relative paths start at `base` (default: cwd)."""
    toml = _tomllib()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: not valid TOML: {exc}") from None
    ctx = Context(name, KeyLines(text), base or Path.cwd(), os.environ if env is None else env)
    return _build(Table(data, (), ctx))


def _build(top: Table) -> InspectionConfig:
    ctx = top.ctx
    values = _TOP.read_values(top)
    device = values["device"] or socket.gethostname()
    try:
        check_topic_part("device", device)
    except ConfigError as exc:
        raise top.error("device", str(exc)) from None
    state_dir = values["state_dir"] or str(ctx.base)
    src_t = top.table("source") or _missing(top, "source", "a [source] table (camera, path, url or picamera)")
    model_t = top.table("model") or _missing(top, "model", "a [model] table (path or dir)")
    zones = tuple(_zone(z) for z in top.tables("zones"))
    _unique([z.name for z in zones], top, "zones")
    rules = tuple(_rule(r, {z.name for z in zones}) for r in top.tables("rules"))
    trig_t, sinks_t, met_t = top.table("trigger"), top.table("sinks"), top.table("metrics")
    source, model = _source(src_t), _model(model_t)
    trigger = _trigger(trig_t) if trig_t else TriggerConfig()
    config = InspectionConfig(
        path=ctx.name, device=device, state_dir=state_dir, source=source, model=model,
        trigger=trigger, zones=zones, rules=rules,
        sinks=parse_sinks(sinks_t, device, state_dir) if sinks_t else SinksConfig(),
        metrics=_METRICS.read(met_t) if met_t else METRICS_OFF, parts=_parts(top, zones, source),
        dashboard=_dashboard(top, trigger))
    if model_t.has("channel") or top.has("fleet"):
        parse = section_parser("fleet", f"{ctx.name}: {'[model] channel' if model_t.has('channel') else '[fleet]'}")
        mq = config.sinks.mqtt
        fleet = parse(model_t, top.table("fleet"), (mq.host, mq.port) if mq is not None else None)
        config = dataclasses.replace(config, fleet=fleet)
    if config.source.width and config.source.height:
        for zone in zones:
            try:
                zone.check_fits(config.source.width, config.source.height)
            except ConfigError as exc:
                raise ConfigError(f"{zone.where}: {exc}") from None
    return config


def _parts(top: Table, zones: tuple[Zone, ...], source: SourceConfig) -> PartsConfig | None:
    if not any(top.has(key) for key in _tables_of("parts")):
        return None
    from edgekit.inspect.parts.config import parse_parts  # tracking loads only for per-part mode

    frame = (source.width, source.height) if source.width is not None and source.height is not None else None
    return parse_parts(top, zones, frame)


def _dashboard(top: Table, trigger: TriggerConfig) -> DashboardConfig | None:
    t = top.table("dashboard")
    if t is None:
        return None
    from edgekit.inspect.dashboard.config import parse_dashboard

    return parse_dashboard(t, on_demand=trigger.mode is TriggerMode.ON_DEMAND)


def _missing(t: Table, key: str, expect: str) -> Any:
    raise t.error(key, f"missing; expected {expect}")


def _unique(names: list[str], t: Table, key: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise t.ctx.error((key, i, "name"), f"{n!r} is defined twice")
        seen.add(n)


def _source(t: Table) -> SourceConfig:
    t.allow(*_SOURCE.keys)
    given = [k for k in ("camera", "path", "url", "picamera") if t.has(k) and t.data[k] is not False]
    cfg: SourceConfig = _SOURCE.read(t)
    if len(given) != 1:
        raise t.error(None, f"give exactly one of camera, path, url, picamera; got {given or 'none'}")
    return cfg


def _delegate(text: str) -> DelegateSpec:
    """[model] delegate, read once (Delegate.parse's sentence, at the key's line)."""
    try:
        return DelegateSpec.parse(text)
    except InputError as exc:
        raise ConfigError(str(exc)) from None


def _model(t: Table) -> ModelConfig:
    t.allow(*_MODEL.keys)
    if t.has("path") == t.has("dir"):
        raise t.error(None, "give exactly one of path (a .tflite file) or dir (a versioned model folder)")
    cfg: ModelConfig = _MODEL.read(t)
    return cfg


def _zone(t: Table) -> Zone:
    v = _ZONE.read_values(t)
    try:
        return Zone(v["name"], v["polygon"], **written({"anchor": v["anchor"]}), where=t.where())
    except ConfigError as exc:
        raise t.error("polygon", str(exc)) from None


def _is_polygon(v: list[Any]) -> bool:
    return len(v) >= 3 and all(isinstance(p, list) and len(p) == 2 and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0 for c in p) for p in v)


def _rule(t: Table, zones: set[str]) -> Rule:
    v = _RULE.read_values(t, checks={"zone": one_of(zones, "a zone defined in [[zones]]")})
    count, lo, hi = v["count"], v["min"], v["max"]
    if count is not None and (lo is not None or hi is not None):
        raise t.error("count", "count means exactly that many; give count, or min and/or max, not both")
    if count is None and lo is None and hi is None:
        raise t.error(None, "needs count (exactly), or min and/or max")
    if lo is not None and hi is not None and lo > hi:
        raise t.error("min", f"min {lo} is above max {hi}")
    return Rule(v["label"], v["zone"], count if count is not None else lo, count if count is not None else hi,
                v["min_score"], where=t.where(), min_area=v["min_area"])


def _trigger(t: Table) -> TriggerConfig:
    cfg: TriggerConfig = _TRIGGER.read(t)
    if cfg.mode is TriggerMode.ON_DEMAND and cfg.file is None and cfg.http_port is None:
        raise t.error("mode", "on-demand needs a trigger: file = \"/run/edgekit/trigger\" and/or http_port = 8089 "
                              "(or fire triggers from Python with Inspector.trigger())")
    return cfg
