"""The ``[parts]``, ``[line]`` and ``[plc]`` tables of an inspection config (per-part mode).

::

    [parts]                      # per-part mode: one verdict per part at the line
    classes = ["part"]           # the model's classes that are parts
    defects = ["scratch", "dent", "missing_hole"]
    min_overlap = 0.5            # share of a defect's box inside the part's box
    evidence = "frames"          # "frames": seen in >= min_frames frames; "score": scores add up to min_score_sum
    min_frames = 2
    # whole_defects = false      # on (true) by default: a defect box cut by the frame's edge is no sighting
    crops = true                 # best-frame JPEG of each part under <state_dir>/crops
    # count_score = 0.5          # off (0) by default: a track counts once a box of it scored this
    # piece_overlap = 0.7        # off (0) by default: a track this much inside an older part's is a piece of it

    [line]                       # where a part is judged: its track crosses the line that way
    start = [160, 0]
    end = [160, 320]
    direction = "left_to_right"  # right_to_left, top_to_bottom, bottom_to_top, any
    anchor = "center"            # or "bottom_center"
    # zone = "gate"              # instead of start/end: entering a [[zones]] zone (event = "enter" | "exit")

    [plc]                        # the reject signal for failed parts (optional)
    host = "192.168.0.10"        # Modbus TCP
    coil = 3                     # or register = 40, value = 1
    distance = 0.6               # m from the line to the ejector; with belt_speed (m/s) gives the delay
    belt_speed = 0.25            # (or delay = 2.4 seconds)
    # encoder_pin = 27           # or the delay in belt travel: an encoder's pulses on a GPIO pin ...
    # delay_ticks = 480          # ... and the ticks from the line to the ejector (instead of distance/delay)
    gpio_pin = 17                # a GPIO pulse as well (or alone, without host)

Errors name the file, line and key, like the rest of the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgekit.errors import ConfigError
from edgekit.inspect.parts import Evidence, PartsOptions, belt_tracker
from edgekit.inspect.plc import ModbusTarget, Register, belt_delay
from edgekit.inspect.rules import Zone
from edgekit.inspect.schema import (NONNEG_INT, NONNEG_NUM, POS_INT, POS_NUM, Constraint, Section,
                                   Setting, one_of, setting, written)
from edgekit.inspect.tomlpos import Table
from edgekit.ranges import declared
from edgekit.track import LINE_ANCHORS, Anchor, CountingLine, Direction, ZoneCrossing, ZoneEvent

__all__ = ["PartsConfig", "PlcConfig", "parse_parts"]


def _is_pin(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (isinstance(v, str) and bool(v))


_PIN = Constraint(_is_pin, "a GPIO number (BCM) or a gpiozero pin name such as \"GPIO17\"")


@dataclass(frozen=True)
class PlcConfig:
    """Where rejects go and when: a Modbus target and/or a GPIO pin, ``delay`` s after the crossing."""

    modbus: ModbusTarget | None = None
    gpio_pin: int | str | None = setting(object, None, _PIN)
    gpio_pulse: float = setting(float, 0.1, POS_NUM)
    delay: float = setting(float, 0.0, NONNEG_NUM)
    retry_interval: float = setting(float, 0.2, POS_NUM)
    give_up_after: float = setting(float, 5.0, NONNEG_NUM)
    check_at_start: bool = setting(bool, True)
    encoder_pin: int | str | None = setting(object, None, _PIN)  # with delay_ticks: the delay in encoder ticks
    encoder_edge: str = setting(str, "rising", Constraint(lambda v: v in ("rising", "falling", "both"),
                                                     "'rising', 'falling' or 'both'"))
    delay_ticks: int | None = setting(int, None, NONNEG_INT)


@dataclass(frozen=True)
class PartsConfig:
    """Per-part mode: the part/defect options, the line (or zone) and the optional PLC."""

    options: PartsOptions
    line: CountingLine | ZoneCrossing
    plc: PlcConfig | None = None
    crops: bool = False

    def check_labels(self, labels: list[str] | None) -> None:
        """Raises ConfigError when a part or defect class is not a label of the model (a model
        without labels names its classes by number: "0", "1", ...)."""
        if labels:
            self.options.check_labels(labels)
            return
        named = [c for c in (*self.options.parts, *self.options.defects) if not c.isdigit()]
        if named:
            at = f"{self.options.where}: " if self.options.where else ""
            raise ConfigError(f"{at}[parts] names classes {named} but the model has no labels (none in its "
                              "metadata, no labels file in [model]): add labels = \"labels.txt\" to [model], or "
                              "name the classes by number (\"0\", \"1\", ...)")

    def check_frame(self, width: int, height: int) -> None:
        """Raises ConfigError when the line reaches outside the frame."""
        self.line.check_fits(width, height)

    @property
    def low_threshold(self) -> float:
        """The lowest score the detector must keep for the tracker's second association."""
        return self.options.tracker_options().low_threshold


_NAMES = Constraint(lambda v: all(isinstance(x, str) and x for x in v), "an array of class names")
# PartsOptions' defaults are its own; lost_frames and min_track_frames are belt_tracker's (None: its default)
_OPTIONS = Section(PartsOptions, {
    "parts": Setting(list, _NAMES, key="classes", convert=tuple), "defects": Setting(list, _NAMES, convert=tuple),
    "min_overlap": Setting(float), "evidence": Setting(Evidence), "min_frames": Setting(int),
    "min_score_sum": Setting(float), "part_threshold": Setting(float, key="threshold"),
    "defect_threshold": Setting(float), "whole_defects": Setting(bool), "crop": Setting(bool, key="crops"),
    "crop_quality": Setting(int), "count_score": Setting(float),
    "count_wait": Setting(int), "piece_overlap": Setting(float),
    "lost_buffer": Setting(int, POS_INT, key="lost_frames", default=None),
    "min_track_frames": Setting(int, POS_INT, default=None)})
_POINT = Constraint(lambda v: _is_point(v), "an [x, y] point in frame pixels")
# CountingLine's and ZoneCrossing's defaults are their own (None here: not written in the file)
_LINE = Section(None, {
    "start": Setting(list, _POINT, default=None), "end": Setting(list, _POINT, default=None),
    "direction": Setting(Direction, default=None), "anchor": Setting(Anchor, only=tuple(LINE_ANCHORS), default=None),
    "name": Setting(str, default=None), "zone": Setting(str, default=None), "event": Setting(ZoneEvent, default=None)})
# ModbusTarget's and PartsOptions' ranges are on their fields (edgekit.ranges): here only how the file spells them
_MODBUS = Section(ModbusTarget, {
    "host": Setting(str, Constraint(bool, "the PLC's host name or IP address")), "port": Setting(int),
    "unit": Setting(int), "value": Setting(int), "pulse": Setting(float), "timeout": Setting(float)})
_ADDRESS = Setting(int, declared(ModbusTarget, "address"))  # the file's key is "coil" or "register"
_PLC = Section(PlcConfig, {"distance": Setting(float, NONNEG_NUM, default=None),
                           "belt_speed": Setting(float, POS_NUM, default=None)},
               extra_keys=(*_MODBUS.keys, "coil", "register"))


def parse_parts(top: Table, zones: tuple[Zone, ...], frame: tuple[int, int] | None) -> PartsConfig | None:
    """The per-part settings of a config's top table (None without a ``[parts]`` table).

    ``frame``: the source's (width, height) when the config gives them (the line is checked
    against them here; otherwise when the first frame arrives).

    Raises:
        ConfigError: a key is missing or wrong, ``[line]``/``[plc]`` without ``[parts]``, a line that
            cannot be crossed the configured way or lies outside the frame; naming file and line.
    """
    parts_t, line_t, plc_t = top.table("parts"), top.table("line"), top.table("plc")
    if parts_t is None:
        for key, t in (("line", line_t), ("plc", plc_t)):
            if t is not None:
                raise top.error(key, "needs a [parts] table: the line and the PLC work on tracked parts")
        return None
    if line_t is None:
        raise top.error("parts", "per-part mode needs a [line] table (start, end, direction) or a zone to cross")
    options = _options(parts_t)
    line = _line(line_t, zones)
    if frame is not None and isinstance(line, CountingLine):  # zones are checked with the other zones
        where, line.where = line.where, ""
        try:
            line.check_fits(*frame)
        except ConfigError as exc:
            raise line_t.error(None, f"{exc} (the [source] width/height)") from None
        finally:
            line.where = where
    plc = _plc(plc_t) if plc_t is not None else None
    return PartsConfig(options, line, plc, crops=options.crop)


def _options(t: Table) -> PartsOptions:
    v = _OPTIONS.read_values(t)
    if not v["parts"]:
        raise t.error("classes", "name at least one class that is a part, e.g. classes = [\"part\"]")
    v["tracker"] = belt_tracker(v["part_threshold"], **written({"lost_buffer": v.pop("lost_buffer"),
                                                                "min_frames": v.pop("min_track_frames")}))
    try:
        return PartsOptions(**v, where=t.where())
    except ConfigError as exc:
        raise t.error(None, str(exc).removeprefix(f"{t.where()}: ")) from None


def _is_point(v: object) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)


def _line(t: Table, zones: tuple[Zone, ...]) -> CountingLine | ZoneCrossing:
    names = {z.name: z for z in zones}
    v = _LINE.read_values(t, checks={"zone": one_of(set(names), "a zone defined in [[zones]]")})
    if v["zone"] is not None:
        if v["start"] is not None or v["end"] is not None:
            raise t.error("zone", "give a zone, or start and end, not both")
        return ZoneCrossing(names[v["zone"]], **written({"event": v["event"]}), name=v["zone"])
    for key in ("start", "end"):
        if v[key] is None:
            raise t.error(key, f"missing; expected {_POINT.expect}")
    try:
        line = CountingLine(v["start"], v["end"], **written({k: v[k] for k in ("direction", "anchor", "name")}))
    except ConfigError as exc:
        raise t.error("direction" if "runs along" in str(exc) else "start", str(exc)) from None
    line.where = t.where()  # named in the error when a frame turns out smaller than the line
    return line


def _plc(t: Table) -> PlcConfig:
    v = _PLC.read_values(t)
    modbus = None
    if t.has("host"):
        if t.has("coil") == t.has("register"):
            raise t.error("host", "give exactly one of coil = N or register = N for the reject signal")
        kind = Register.COIL if t.has("coil") else Register.HOLDING
        modbus = _MODBUS.read(t, {"kind": kind, "address": _ADDRESS.read(t, kind.value)}, allow=None)
    else:
        for key in ("coil", "register", "port", "unit", "value"):
            if t.has(key):
                raise t.error(key, "needs host = \"<the PLC's address>\" (Modbus TCP)")
    if modbus is None and v["gpio_pin"] is None:
        raise t.error(None, "give host and coil (or register) for a Modbus PLC, and/or gpio_pin")
    if t.has("delay") and (t.has("distance") or t.has("belt_speed")):
        raise t.error("delay", "give delay (seconds), or distance and belt_speed, not both")
    if t.has("distance") != t.has("belt_speed"):
        raise t.error("distance" if t.has("distance") else "belt_speed",
                      "distance (m, line to ejector) and belt_speed (m/s) go together")
    if t.has("delay_ticks") != t.has("encoder_pin"):
        raise t.error("delay_ticks" if t.has("delay_ticks") else "encoder_pin",
                      "delay_ticks (encoder ticks from the line to the ejector) and encoder_pin go together")
    if t.has("delay_ticks") and (t.has("delay") or t.has("distance")):
        raise t.error("delay_ticks", "give the delay in encoder ticks or in seconds (delay, distance), not both")
    distance, speed = v.pop("distance"), v.pop("belt_speed")
    if distance is not None:
        v["delay"] = belt_delay(distance, speed)
    return PlcConfig(modbus=modbus, **v)
