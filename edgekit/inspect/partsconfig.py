"""The ``[parts]``, ``[line]`` and ``[plc]`` tables of an inspection config (per-part mode).

::

    [parts]                      # per-part mode: one verdict per part at the line
    classes = ["part"]           # the model's classes that are parts
    defects = ["scratch", "dent", "missing_hole"]
    min_overlap = 0.5            # share of a defect's box inside the part's box
    evidence = "frames"          # "frames": seen in >= min_frames frames; "score": scores add up to min_score_sum
    min_frames = 2
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
from edgekit.inspect.plc import MAX_ADDRESS, ModbusTarget, Register, belt_delay
from edgekit.inspect.rules import Zone
from edgekit.inspect.tomlpos import PORT, POS_INT, POS_NUM, Table, choice
from edgekit.track import LINE_ANCHORS, Anchor, CountingLine, Direction, ZoneCrossing, ZoneEvent

__all__ = ["PartsConfig", "PlcConfig", "parse_parts"]

_FRACTION: dict[str, Any] = {"check": lambda v: 0 <= v <= 1, "expect": "a number in 0..1"}
_NONNEG: dict[str, Any] = {"check": lambda v: v >= 0, "expect": "a number >= 0"}


@dataclass(frozen=True)
class PlcConfig:
    """Where rejects go and when: a Modbus target and/or a GPIO pin, ``delay`` s after the crossing."""

    modbus: ModbusTarget | None
    gpio_pin: int | str | None
    gpio_pulse: float
    delay: float
    retry_interval: float
    give_up_after: float
    check_at_start: bool
    encoder_pin: int | str | None = None  # with delay_ticks: the delay counted in belt encoder ticks
    encoder_edge: str = "rising"
    delay_ticks: int | None = None


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


def _names(t: Table, key: str, required: bool) -> tuple[str, ...]:
    kw: dict[str, Any] = {"check": lambda v: all(isinstance(x, str) and x for x in v),
                          "expect": "an array of class names"}
    return tuple(t.get(key, list, **kw) if required else t.get(key, list, [], **kw))


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
    return PartsConfig(options, line, plc, crops=parts_t.get("crops", bool, False))


def _options(t: Table) -> PartsOptions:
    t.allow("classes", "defects", "min_overlap", "evidence", "min_frames", "min_score_sum", "threshold",
            "defect_threshold", "crops", "crop_quality", "lost_frames", "min_track_frames", "count_score",
            "count_wait", "piece_overlap")
    classes = _names(t, "classes", required=True)
    if not classes:
        raise t.error("classes", "name at least one class that is a part, e.g. classes = [\"part\"]")
    threshold = t.get("threshold", float, 0.5, **_FRACTION)
    tracker = belt_tracker(threshold, lost_buffer=t.get("lost_frames", int, 30, **POS_INT),
                           min_frames=t.get("min_track_frames", int, 1, **POS_INT))
    try:
        return PartsOptions(
            parts=classes, defects=_names(t, "defects", required=False),
            min_overlap=t.get("min_overlap", float, 0.5, **_FRACTION),
            evidence=choice(t, "evidence", Evidence.FRAMES),
            min_frames=t.get("min_frames", int, 2, **POS_INT),
            min_score_sum=t.get("min_score_sum", float, 1.0, **POS_NUM), part_threshold=threshold,
            defect_threshold=t.get("defect_threshold", float, 0.5, **_FRACTION),
            crop=t.get("crops", bool, False),
            crop_quality=t.get("crop_quality", int, 90, check=lambda v: 1 <= v <= 100, expect="an integer 1..100"),
            count_score=t.get("count_score", float, 0.0, **_FRACTION),
            count_wait=t.get("count_wait", int, 15, check=lambda v: v >= 0, expect="an integer >= 0"),
            piece_overlap=t.get("piece_overlap", float, 0.0, **_FRACTION), tracker=tracker, where=t.where())
    except ConfigError as exc:
        raise t.error(None, str(exc).removeprefix(f"{t.where()}: ")) from None


def _is_point(v: object) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)


def _line(t: Table, zones: tuple[Zone, ...]) -> CountingLine | ZoneCrossing:
    t.allow("start", "end", "direction", "anchor", "name", "zone", "event")
    if t.has("zone"):
        if t.has("start") or t.has("end"):
            raise t.error("zone", "give a zone, or start and end, not both")
        names = {z.name: z for z in zones}
        name = t.get("zone", str, check=lambda v: v in names,
                     expect=f"a zone defined in [[zones]] ({', '.join(sorted(names)) or 'none defined'})")
        return ZoneCrossing(names[name], choice(t, "event", ZoneEvent.ENTER),
                            name=name)
    start = t.get("start", list, check=_is_point, expect="an [x, y] point in frame pixels")
    end = t.get("end", list, check=_is_point, expect="an [x, y] point in frame pixels")
    direction, anchor = choice(t, "direction", Direction.ANY), choice(t, "anchor", Anchor.CENTER, LINE_ANCHORS)
    try:
        line = CountingLine(start, end, direction=direction, anchor=anchor,
                            name=t.get("name", str, "line"))
    except ConfigError as exc:
        raise t.error("direction" if "runs along" in str(exc) else "start", str(exc)) from None
    line.where = t.where()  # named in the error when a frame turns out smaller than the line
    return line


def _plc(t: Table) -> PlcConfig:
    t.allow("host", "port", "unit", "coil", "register", "value", "pulse", "timeout", "delay", "distance",
            "belt_speed", "retry_interval", "give_up_after", "gpio_pin", "gpio_pulse", "check_at_start",
            "encoder_pin", "encoder_edge", "delay_ticks")
    address: dict[str, Any] = {"check": lambda v: 0 <= v <= MAX_ADDRESS,
               "expect": f"a Modbus address 0..{MAX_ADDRESS} (a coil or register number, from 0)"}
    modbus = None
    if t.has("host"):
        if t.has("coil") == t.has("register"):
            raise t.error("host", "give exactly one of coil = N or register = N for the reject signal")
        kind = Register.COIL if t.has("coil") else Register.HOLDING
        modbus = ModbusTarget(
            host=t.get("host", str, check=bool, expect="the PLC's host name or IP address"),
            address=t.get(kind.value, int, **address), kind=kind, port=t.get("port", int, 502, **PORT),
            unit=t.get("unit", int, 1, check=lambda v: 0 <= v <= 247, expect="a Modbus unit id 0..247"),
            value=t.get("value", int, 1, check=lambda v: 0 <= v <= 65535, expect="a register value 0..65535"),
            pulse=t.get("pulse", float, 0.5, **_NONNEG), timeout=t.get("timeout", float, 1.0, **POS_NUM))
    else:
        for key in ("coil", "register", "port", "unit", "value"):
            if t.has(key):
                raise t.error(key, "needs host = \"<the PLC's address>\" (Modbus TCP)")
    pin: dict[str, Any] = {"check": lambda v: (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (
        isinstance(v, str) and bool(v)), "expect": "a GPIO number (BCM) or a gpiozero pin name such as \"GPIO17\""}
    gpio = t.get("gpio_pin", object, None, **pin)
    if modbus is None and gpio is None:
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
    if t.has("distance"):
        delay = belt_delay(t.get("distance", float, **_NONNEG), t.get("belt_speed", float, **POS_NUM))
    else:
        delay = t.get("delay", float, 0.0, **_NONNEG)
    edge: dict[str, Any] = {"check": lambda v: v in ("rising", "falling", "both"), "expect": "'rising', 'falling' or 'both'"}
    return PlcConfig(modbus=modbus, gpio_pin=gpio, gpio_pulse=t.get("gpio_pulse", float, 0.1, **POS_NUM),
                     delay=delay, retry_interval=t.get("retry_interval", float, 0.2, **POS_NUM),
                     give_up_after=t.get("give_up_after", float, 5.0, **_NONNEG),
                     encoder_pin=t.get("encoder_pin", object, None, **pin),
                     encoder_edge=t.get("encoder_edge", str, "rising", **edge),
                     delay_ticks=t.get("delay_ticks", int, None, check=lambda v: v >= 0, expect="an integer >= 0"),
                     check_at_start=t.get("check_at_start", bool, True))
