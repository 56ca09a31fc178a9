"""The inspection file's one schema: the wings declare their keys, one reader reads them, and each
default is written once (the file's absent key and Python's omitted argument agree)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from edgekit.errors import ConfigError
from edgekit.inspect import parse_config
from edgekit.inspect.config import FLEET_MODEL_KEYS, MetricsConfig, SourceConfig, TriggerConfig
from edgekit.inspect.dashboard.config import DashboardConfig
from edgekit.inspect.schema import POS_INT, Section, Setting, between, setting
from edgekit.inspect.tomlpos import Context, KeyLines, Table
from edgekit.sinks.mqtt import MqttConfig
from edgekit.sinks.rotating import RotatingConfig
from edgekit.sinks.webhook import WebhookConfig

ROOT = Path(__file__).resolve().parents[3]
PARSERS = ["edgekit/inspect/config.py", "edgekit/inspect/sinkconfig.py", "edgekit/inspect/parts/config.py",
           "edgekit/inspect/dashboard/config.py", "edgekit/fleet/settings.py"]

BASE = """\
device = "cell-4"
[source]
path = "images"
[model]
dir = "models"
"""


@pytest.mark.parametrize("module", PARSERS)
def test_the_wings_declare_their_keys_and_do_not_read_them(module: str) -> None:
    """No table read by a literal key (``t.get("port", int, 9100)``): a key is read by the schema's reader,
    which holds its type, range and default once."""
    hand_read = [f"{module}:{node.lineno}" for node in ast.walk(ast.parse((ROOT / module).read_text()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr in ("get", "path_value") and node.args
                 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)]
    assert not hand_read


def _table(text: str, name: str = "cell.toml") -> Table:
    import tomllib

    return Table(tomllib.loads(text), (), Context(name, KeyLines(text), Path("/cfg"), {}))


@dataclasses.dataclass(frozen=True)
class _Belt:
    speed: float = setting(float, 0.25, between(0, 2, "m/s in 0..2"))
    name: str = setting(str, "belt")
    pulses: int | None = setting(int, None, POS_INT, key="pulses_per_m")
    log: str | None = setting(str, None, path=True)


BELT = Section(_Belt)


@pytest.mark.parametrize("text, expected", [
    ("", _Belt()),
    ("speed = 1\nname = \"b2\"\n", _Belt(speed=1.0, name="b2")),
    ("pulses_per_m = 480\nlog = \"belt.log\"\n", _Belt(pulses=480, log="/cfg/belt.log")),
    ("speed = 3\n", "cell.toml:1: speed: expected m/s in 0..2, got 3 (an integer)"),
    ("\n\nspede = 1\n", "cell.toml:3: spede: unknown key; did you mean 'speed'?"),
    ("pulses = 2\n", "cell.toml:1: pulses: unknown key; did you mean 'pulses_per_m'?"),
    ("pulses_per_m = 0\n", "cell.toml:1: pulses_per_m: expected an integer > 0, got 0 (an integer)"),
    ("name = 1\n", "cell.toml:1: name: expected str, got 1 (an integer)"),
])
def test_one_reader_types_checks_and_places_each_key(text: str, expected: _Belt | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(ConfigError) as err:
            BELT.read(_table(text))
        assert str(err.value) == expected
    else:
        assert BELT.read(_table(text)) == expected


def test_a_required_key_says_what_to_write() -> None:
    section = Section(None, {"host": Setting(str, doc="the PLC's address")})
    with pytest.raises(ConfigError, match=r"^cell.toml: host: missing; expected the PLC's address$"):
        section.read_values(_table(""))


def test_a_default_is_written_once() -> None:
    """A section over a dataclass takes the dataclass's defaults; a second one beside it is refused."""
    with pytest.raises(TypeError, match="one default per key"):
        Section(_Belt, {"speed": Setting(float, default=0.5)})


def test_an_absent_table_and_an_empty_one_give_python_s_defaults() -> None:
    c = parse_config(BASE + "[trigger]\n[metrics]\n[dashboard]\nport = 8080\n[sinks.jsonl]\n[sinks.mqtt]\n"
                     "[sinks.webhook]\nurl = \"https://example.com/hook\"\n", name="cell.toml", base=Path("/cfg"))
    assert c.trigger == TriggerConfig() and c.metrics == MetricsConfig()
    assert c.dashboard == DashboardConfig(port=8080)
    assert c.sinks.jsonl == RotatingConfig(directory="/cfg/events")
    assert c.sinks.mqtt == MqttConfig(device="cell-4", queue_path="/cfg/mqtt-queue.db")
    assert c.sinks.webhook == WebhookConfig(url="https://example.com/hook", queue_path="/cfg/webhook-queue.db")
    bare = parse_config(BASE, name="cell.toml", base=Path("/cfg"))
    assert bare.trigger == TriggerConfig() and not bare.metrics.enabled  # no [metrics] table: off
    assert bare.source == SourceConfig(path="/cfg/images")


def test_python_made_settings_are_held_to_the_file_s_ranges() -> None:
    from edgekit.fleet.settings import FleetSettings, Trust

    with pytest.raises(ConfigError, match=r"dashboard max_fps: expected frames per second in \(0, 60\], got 100"):
        DashboardConfig(port=0, max_fps=100)
    assert DashboardConfig(port=0).port == 0  # Python may ask for any free port; the file names a real one
    with pytest.raises(ConfigError, match=r"fleet keep_versions: expected an integer >= 2 \(the serving version"):
        FleetSettings(channel="file:///srv/rel/line1/channel.json", trust=Trust.UNSIGNED_LOCAL, keep_versions=1)


def test_the_fleet_wing_s_keys_are_placed_like_the_rest(tmp_path: Path) -> None:
    text = BASE + f'channel = "file://{tmp_path}/rel/channel.json"\ntrust = "unsigned-local"\n[fleet]\njitter = 0.1\n' \
        "keep_versions = 1\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text, name="cell.toml", base=tmp_path)
    assert str(err.value).startswith("cell.toml:10: fleet.keep_versions: expected an integer >= 2"), err.value


def test_the_fleet_wing_reads_the_model_keys_the_config_leaves_to_it() -> None:
    from edgekit.fleet.settings import _MODEL_KEYS

    assert set(_MODEL_KEYS.keys) == set(FLEET_MODEL_KEYS)


def test_release_and_follower_notify_on_one_topic() -> None:
    from edgekit.fleet.settings import FleetSettings, Trust, channel_topic

    s = FleetSettings(channel="file:///srv/rel/line1/channel.json", trust=Trust.UNSIGNED_LOCAL)
    assert s.notification_topic == channel_topic("line1") == "edgekit/channel/line1"


# The dataclasses whose ranges the file's sections read from their fields (edgekit.ranges or setting()).
# (FleetSettings keeps its ranges in its section, _FLEET, which its __post_init__ checks it against.)
RANGED = ["edgekit.sinks.mqtt:MqttConfig", "edgekit.sinks.webhook:WebhookConfig", "edgekit.sinks.rotating:RotatingConfig",
          "edgekit.inspect.plc:ModbusTarget", "edgekit.inspect.parts.options:PartsOptions",
          "edgekit.inspect.dashboard.config:DashboardConfig", "edgekit.inspect.config:MetricsConfig"]


def _class(spec: str) -> type:
    import importlib

    module, name = spec.split(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def _ranged_fields(cls: type) -> set[str]:
    from edgekit.ranges import range_of

    return {f.name for f in dataclasses.fields(cls) if range_of(f) is not None}


def _second_ranges(cls: type) -> list[str]:
    """``self.<ranged field>`` compared with a number in the class's ``__post_init__``: its range again
    (fields the post-init checks itself, passed as ``skip=``, are its own business)."""
    import inspect
    import textwrap

    post = getattr(cls, "__post_init__", None)
    if post is None:
        return []
    tree = ast.parse(textwrap.dedent(inspect.getsource(post)))
    skipped = {e.value for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "skip"
               and isinstance(node.value, ast.Tuple) for e in node.value.elts if isinstance(e, ast.Constant)}
    ranged = _ranged_fields(cls) - skipped
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            fields = [s.attr for s in sides if isinstance(s, ast.Attribute) and isinstance(s.value, ast.Name)
                      and s.value.id == "self" and s.attr in ranged]
            if fields and any(isinstance(s, ast.Constant) and isinstance(s.value, (int, float)) for s in sides):
                found.append(f"{cls.__name__}.{fields[0]} (line {node.lineno} of __post_init__)")
    return found


@pytest.mark.parametrize("spec", RANGED)
def test_a_range_is_declared_once(spec: str) -> None:
    """Each range on its field, read by the file's section and checked by one call in __post_init__."""
    cls = _class(spec)
    assert _ranged_fields(cls), f"{spec} declares no range on its fields"
    assert not _second_ranges(cls), f"a range written again in __post_init__: {_second_ranges(cls)}"


def test_the_range_checks_can_fail() -> None:
    from edgekit.ranges import PORT, check_ranges, ranged

    @dataclasses.dataclass(frozen=True)
    class Twice:
        port: int = ranged(80, PORT)

        def __post_init__(self) -> None:
            check_ranges(self, "twice")
            if not 0 < self.port < 65536:
                raise ConfigError("port must be 1-65535")

    assert _second_ranges(Twice) == ["Twice.port (line 3 of __post_init__)"]
    with pytest.raises(TypeError, match="one range per key"):
        Section(Twice, {"port": Setting(int, POS_INT)})
    assert Section(Twice, {"port": Setting(int)}).settings["port"].check is PORT


@pytest.mark.parametrize("table, build, expect", [
    ("[sinks.mqtt]\nport = 0\n", lambda: MqttConfig(device="d", queue_path="q", port=0),
     "port: expected a port number 1-65535, got 0"),
    ("[sinks.jsonl]\nmax_bytes = 100\n", lambda: RotatingConfig(directory="/tmp", max_bytes=100),
     "max_bytes: expected an integer >= 1024 (bytes), got 100"),
    ('[sinks.webhook]\nurl = "https://h/x"\nbackoff_initial = -1.0\n',
     lambda: WebhookConfig(url="https://h/x", queue_path="q", backoff_initial=-1.0),
     "backoff_initial: expected a number > 0, got -1.0"),
    ('[parts]\nclasses = ["part"]\nmin_overlap = 1.5\n[line]\nstart = [0, 50]\nend = [100, 50]\n',
     lambda: _class("edgekit.inspect.parts.options:PartsOptions")(parts=("part",), min_overlap=1.5),
     "min_overlap: expected a number in 0..1, got 1.5"),
    ('[parts]\nclasses = ["part"]\n[line]\nstart = [0, 50]\nend = [100, 50]\n[plc]\nhost = "plc"\ncoil = 3\n'
     'unit = 300\n', lambda: _class("edgekit.inspect.plc:ModbusTarget")("plc", 3, unit=300),
     "unit: expected a Modbus unit id 0..247, got 300"),
])
def test_python_and_the_file_say_the_same_sentence(table: str, build: object, expect: str) -> None:
    with pytest.raises(ConfigError) as in_file:
        parse_config(BASE + table, name="cell.toml", base=Path("/cfg"))
    with pytest.raises(ConfigError) as in_python:
        build()  # type: ignore[operator]
    assert expect in str(in_python.value), in_python.value
    assert expect in str(in_file.value) and str(in_file.value).startswith("cell.toml:"), in_file.value


def test_the_top_tables_are_the_config_s_sections() -> None:
    """The top table's keys come from InspectionConfig's fields (per-part mode's three tables from its one)."""
    from edgekit.inspect.config import _TOP, InspectionConfig

    fields = {f.name for f in dataclasses.fields(InspectionConfig)} - {"path", "parts"}
    assert set(_TOP.keys) == fields | {"parts", "line", "plc"}
    with pytest.raises(ConfigError, match="dashbord.*did you mean 'dashboard'"):
        parse_config(BASE + "[dashbord]\nport = 1\n", name="cell.toml")
