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
from edgekit.inspect.tomlpos import NONNEG_INT, PORT, POS_INT, POS_NUM, Context, KeyLines, Table, choice
from edgekit.inspect.triggers import PublishMode, TriggerMode
from edgekit.sinks.mqtt import check_topic_part

if TYPE_CHECKING:
    from edgekit.inspect.dashboard.config import DashboardConfig
    from edgekit.inspect.partsconfig import PartsConfig

# Keys of [model] that the release-channel wing reads (edgekit.fleet.settings, an edgekit.cell_sections entry point).
FLEET_MODEL_KEYS = ("channel", "public_key", "trust")

__all__ = ["InspectionConfig", "SourceConfig", "ModelConfig", "TriggerConfig", "MetricsConfig",
           "SinksConfig", "load_config", "parse_config"]

@dataclass(frozen=True)
class SourceConfig:
    """Exactly one of camera, path, url, picamera."""

    camera: int | str | None = None  # index or /dev/videoN
    path: str | None = None  # a video file, image, folder or glob
    url: str | None = None  # rtsp://, http://
    picamera: bool = False
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    realtime: bool = False

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

    path: str | None = None
    dir: str | None = None
    delegate: str = "auto"
    threads: int | None = None
    labels: str | None = None
    threshold: float = 0.5
    poll_seconds: float = 2.0


@dataclass(frozen=True)
class TriggerConfig:
    mode: TriggerMode = TriggerMode.CONTINUOUS
    file: str | None = None  # touch this file to trigger (on-demand)
    http_port: int | None = None  # POST http://<http_host>:<port>/trigger (on-demand)
    http_host: str = "127.0.0.1"
    timeout: float = 5.0  # how long a trigger waits for a frame captured after it
    publish: PublishMode = PublishMode.EVERY  # continuous mode: every verdict, or only changes


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 9100


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
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    parts: PartsConfig | None = None  # per-part mode: [parts], [line], [plc]
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
    top.allow("device", "state_dir", "source", "model", "zones", "rules", "trigger", "sinks", "metrics",
              "parts", "line", "plc", "dashboard", "fleet")
    device = top.get("device", str, socket.gethostname(), expect="a device id")
    try:
        check_topic_part("device", device)
    except ConfigError as exc:
        raise top.error("device", str(exc)) from None
    state_dir = top.path_value("state_dir", ".")
    src_t = top.table("source") or _missing(top, "source", "a [source] table (camera, path, url or picamera)")
    model_t = top.table("model") or _missing(top, "model", "a [model] table (path or dir)")
    zones = tuple(_zone(z) for z in top.tables("zones"))
    _unique([z.name for z in zones], top, "zones")
    rules = tuple(_rule(r, {z.name for z in zones}) for r in top.tables("rules"))
    trig_t, sinks_t, met_t = top.table("trigger"), top.table("sinks"), top.table("metrics")
    source, model = _source(src_t), _model(model_t)
    trigger = _trigger(trig_t) if trig_t else TriggerConfig()
    config = InspectionConfig(
        path=ctx.name, device=device, state_dir=str(state_dir), source=source, model=model,
        trigger=trigger, zones=zones, rules=rules,
        sinks=parse_sinks(sinks_t, device, str(state_dir)) if sinks_t else SinksConfig(),
        metrics=_metrics(met_t) if met_t else MetricsConfig(), parts=_parts(top, zones),
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


def _parts(top: Table, zones: tuple[Zone, ...]) -> PartsConfig | None:
    if not any(top.has(key) for key in ("parts", "line", "plc")):
        return None
    from edgekit.inspect.partsconfig import parse_parts  # tracking loads only for per-part mode

    src = top.data.get("source")
    width, height = (src.get("width"), src.get("height")) if isinstance(src, dict) else (None, None)
    return parse_parts(top, zones, (width, height) if isinstance(width, int) and isinstance(height, int) else None)


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
    t.allow("camera", "path", "url", "picamera", "width", "height", "fps", "realtime")
    camera = t.data.get("camera")
    t.get("camera", object, None, check=lambda v: (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
          or (isinstance(v, str) and v.startswith("/dev/video")), expect="a camera index >= 0 or /dev/videoN")
    given = [k for k in ("camera", "path", "url", "picamera") if t.has(k) and t.data[k] is not False]
    if len(given) != 1:
        raise t.error(None, f"give exactly one of camera, path, url, picamera; got {given or 'none'}")
    cfg = SourceConfig(
        camera=camera, path=t.path_value("path"),
        url=t.get("url", str, None, check=lambda v: "://" in v, expect="a URL like rtsp://host/stream"),
        picamera=t.get("picamera", bool, False),
        width=t.get("width", int, None, **POS_INT), height=t.get("height", int, None, **POS_INT),
        fps=t.get("fps", float, None, **POS_NUM), realtime=t.get("realtime", bool, False))
    return cfg


def _model(t: Table) -> ModelConfig:
    from edgekit.runtimes.delegates import Delegate

    t.allow("path", "dir", "delegate", "threads", "labels", "threshold", "poll_seconds", *FLEET_MODEL_KEYS)
    if t.has("path") == t.has("dir"):
        raise t.error(None, "give exactly one of path (a .tflite file) or dir (a versioned model folder)")
    delegate = t.get("delegate", str, "auto", expect="auto, cpu, xnnpack, edgetpu or edgetpu:usb:N")
    try:
        Delegate.parse(delegate)
    except InputError as exc:
        raise t.error("delegate", str(exc)) from None
    cfg = ModelConfig(
        path=t.path_value("path"), dir=t.path_value("dir"), delegate=delegate,
        threads=t.get("threads", int, None, **POS_INT), labels=t.path_value("labels"),
        threshold=t.get("threshold", float, 0.5, check=lambda v: 0 <= v <= 1, expect="a number in 0..1"),
        poll_seconds=t.get("poll_seconds", float, 2.0, **POS_NUM))
    return cfg


def _zone(t: Table) -> Zone:
    t.allow("name", "polygon", "anchor")
    name = t.get("name", str, expect="a zone name")
    polygon = t.get("polygon", list, check=_is_polygon, expect="an array of at least 3 [x, y] pixel points")
    anchor = choice(t, "anchor", Anchor.CENTER)
    try:
        return Zone(name, polygon, anchor, where=t.where())
    except ConfigError as exc:
        raise t.error("polygon", str(exc)) from None


def _is_polygon(v: list[Any]) -> bool:
    return len(v) >= 3 and all(isinstance(p, list) and len(p) == 2 and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0 for c in p) for p in v)


def _rule(t: Table, zones: set[str]) -> Rule:
    t.allow("label", "zone", "count", "min", "max", "min_score", "min_area")
    label = t.get("label", str, expect="the label to count, e.g. 'screw'")
    zone = t.get("zone", str, None, check=lambda v: v in zones,
                 expect=f"a zone defined in [[zones]] ({', '.join(sorted(zones)) or 'none defined'})")
    count = t.get("count", int, None, **NONNEG_INT)
    lo, hi = t.get("min", int, None, **NONNEG_INT), t.get("max", int, None, **NONNEG_INT)
    if count is not None and (lo is not None or hi is not None):
        raise t.error("count", "count means exactly that many; give count, or min and/or max, not both")
    if count is None and lo is None and hi is None:
        raise t.error(None, "needs count (exactly), or min and/or max")
    if lo is not None and hi is not None and lo > hi:
        raise t.error("min", f"min {lo} is above max {hi}")
    min_score = t.get("min_score", float, None, check=lambda v: 0 <= v <= 1, expect="a number in 0..1")
    min_area = t.get("min_area", float, None, check=lambda v: v >= 0, expect="pixels, a number >= 0")
    return Rule(label, zone, count if count is not None else lo, count if count is not None else hi,
                min_score, where=t.where(), min_area=min_area)


def _trigger(t: Table) -> TriggerConfig:
    t.allow("mode", "file", "http_port", "http_host", "timeout", "publish")
    cfg = TriggerConfig(
        mode=choice(t, "mode", TriggerMode.CONTINUOUS), file=t.path_value("file"),
        http_port=t.get("http_port", int, None, **PORT), http_host=t.get("http_host", str, "127.0.0.1"),
        timeout=t.get("timeout", float, 5.0, **POS_NUM), publish=choice(t, "publish", PublishMode.EVERY))
    if cfg.mode is TriggerMode.ON_DEMAND and cfg.file is None and cfg.http_port is None:
        raise t.error("mode", "on-demand needs a trigger: file = \"/run/edgekit/trigger\" and/or http_port = 8089 "
                              "(or fire triggers from Python with Inspector.trigger())")
    return cfg


def _metrics(t: Table) -> MetricsConfig:
    t.allow("enabled", "host", "port")
    cfg = MetricsConfig(enabled=t.get("enabled", bool, True), host=t.get("host", str, "127.0.0.1"),
                        port=t.get("port", int, 9100, **PORT))
    return cfg
