"""Does the fleet trial roll back identical models? Does it still catch a bad one?

    python benchmarks/fleet_trial.py [--demo edgekit-demo] [--frames 2400] [--trials 20] [--record FILE]
    python benchmarks/fleet_trial.py --replay tests/edgekit/fleet/data/belt_verdicts.json

(1) Records what a real cell reports to the fleet health check, frame by frame (top score, FAIL
    verdict): the demo's int8 detector and inspection.toml (run `edgekit demo` first) on a belt
    video of --frames frames that the demo's generator writes (another seed than the demo's own
    300-frame clip, so windows see different parts), in per-frame mode (the config without [parts]
    and [line]) and per-part mode (without [[rules]]: only the part verdicts, one where a part
    crosses the line). --record keeps the sequences as JSON
    (the test tests/edgekit/fleet/test_trial.py replays the committed copy).
(2) Replays --trials trials per mode and window at seeded offsets of those sequences: the
    baseline is the `health_baseline` frames before the offset, the trial the window after it.
    "identical": the trial's frames are the recording's own (a model whose verdicts equal the
    serving one's, frame for frame, on later frames); "bad": every verdict FAIL and every top
    score 0.2 lower; "all FAIL": every verdict FAIL, scores as they were. Counts the trials the
    health check calls regressed, with today's test (a difference beyond 3 standard errors of
    the belt's own variation, more with few independent looks; a trial that cannot tell runs on
    up to 4 windows, then its size alone decides) beside the rule before it (the bare thresholds
    on one window).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgekit.fleet.health import EXTEND, Health, HealthThresholds, HealthTracker, frame_health  # noqa: E402

Frame = tuple  # (top score or None, FAIL or None)


def record(demo: Path, frames: int, seed: int, threshold: str | None) -> dict[str, list[Frame]]:
    """Each mode's per-frame (score, failed) from a real cell run on a generated belt video
    (`threshold`: another score threshold than the config's 0.4, for the weak --quick model)."""
    from edgekit.demo.conveyor import make_video
    from edgekit.inspect import Cell, load_config

    config = demo / "inspection.toml"
    text = config.read_text()
    if threshold is not None:
        text = text.replace("= 0.4\n", f"= {threshold}\n")
    out: dict[str, list[Frame]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "belt.avi"
        make_video(video, n_frames=frames, fps=15.0, seed=seed)
        text = text.replace('path = "belt.avi"', f'path = "{video}"').replace(
            "realtime = true", "realtime = false").replace(
            'path = "detector_int8.tflite"', f'path = "{demo / "detector_int8.tflite"}"')
        parts_only = re.sub(r"\[\[rules\]\]\n(?:[^\[\n].*\n|\n)*", "", text)  # the part verdicts alone
        for mode, body in (("frame", text.split("\n[parts]")[0]), ("part", parts_only)):
            folder = Path(tmp) / mode
            folder.mkdir()
            (folder / "inspection.toml").write_text(body)
            seen: list[Frame] = []
            def health(frame: Any, seen: list[Frame] = seen) -> None:  # what the follower's stage observes
                score, failed = frame_health(frame.result, frame.decisions, frame.parts)
                seen.append((None if score is None else round(score, 4), failed))

            stage = SimpleNamespace(open=lambda context: None, process=health, close=lambda: None)
            with Cell(load_config(folder / "inspection.toml"), stages=[stage]) as cell:
                for _ in cell.run():
                    pass
            out[mode] = seen
    return out


def old_rule(base: list[Frame], trial: list[Frame], t: HealthThresholds) -> bool:
    """The check before this one: a FAIL rate up by more than the threshold, or a score shift."""
    def rates(frames: list[Frame]) -> tuple[float | None, float | None]:
        f = [x[1] for x in frames if x[1] is not None]
        s = [x[0] for x in frames if x[0] is not None]
        return (sum(f) / len(f) if f else None), (sum(s) / len(s) if s else None)
    (bf, bs), (tf, ts) = rates(base), rates(trial)
    return (bf is not None and tf is not None and tf - bf > t.max_fail_rate_increase) or \
        (bs is not None and ts is not None and abs(ts - bs) > t.max_score_shift)


def judge(base: list[Frame], trial: list[Frame], t: HealthThresholds) -> tuple[bool, str, int]:
    """(regressed, why, trial frames it took) from the health check itself."""
    tracker = HealthTracker(t)
    tracker.switched(1, trial=False)
    for score, failed in base:
        tracker.observe(score, failed)
    tracker.switched(2, trial=True)
    for i, (score, failed) in enumerate(trial):
        verdict = tracker.observe(score, failed)
        if verdict is not None:
            return verdict.health is Health.REGRESSED, verdict.reason, i + 1
    raise RuntimeError(f"no verdict in {len(trial)} trial frames")


VARIANTS = {
    "identical": lambda f: f,
    "bad": lambda f: (None if f[0] is None else max(0.0, f[0] - 0.2), None if f[1] is None else True),
    "all FAIL": lambda f: (f[0], None if f[1] is None else True),
}


def replay(sequences: dict[str, list[Frame]], trials: int, windows: list[int], baseline: int) -> dict:
    results: dict = {}
    print(f"(2) {trials} trials per row at seeded offsets; baseline {baseline} frames; thresholds: FAIL rate "
          f"+{HealthThresholds().max_fail_rate_increase:.0%}, score shift {HealthThresholds().max_score_shift}")
    print("    mode    window  variant     rolled back (now)  trial frames (now)  rolled back (bare thresholds, "
          "one window)  judged units a window")
    for mode, seq in sequences.items():
        n = len(seq)
        for window in windows:
            t = HealthThresholds(window=window, baseline=baseline)
            rng = random.Random(f"{mode}-{window}")
            offsets = [rng.randrange(n) for _ in range(trials)]
            for name, change in VARIANTS.items():
                now = old = 0
                units, took = [], []
                for o in offsets:
                    loop = [seq[(o + i) % n] for i in range(baseline + EXTEND * window)]  # the belt video looped
                    base, trial = loop[:baseline], [change(f) for f in loop[baseline:]]
                    units.append(sum(f[1] is not None for f in trial[:window]))
                    regressed, _, frames = judge(base, trial, t)
                    now += regressed
                    took.append(frames)
                    old += old_rule(base, trial[:window], t)
                results[(mode, window, name)] = (now, old)
                print(f"    {mode:<7} {window:>6}  {name:<10} {now:>3} of {trials:<12}  {min(took):>5}-{max(took):<11} "
                      f"{old:>3} of {trials:<35} {min(units)}-{max(units)}")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", default="edgekit-demo", help="the folder `edgekit demo --out` wrote")
    ap.add_argument("--frames", type=int, default=2400, help="frames of the generated belt video")
    ap.add_argument("--seed", type=int, default=7, help="the generated belt's seed (the demo's own clip is 0)")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--windows", default="300,45", help="health_window values to try")
    ap.add_argument("--baseline", type=int, default=HealthThresholds().baseline, help="health_baseline")
    ap.add_argument("--threshold", help="score thresholds instead of the config's 0.4 (the --quick demo's weak model)")
    ap.add_argument("--record", metavar="FILE", help="write the recorded sequences here (JSON)")
    ap.add_argument("--replay", metavar="FILE", help="replay sequences recorded before instead of recording")
    a = ap.parse_args()
    if a.replay:
        doc = json.loads(Path(a.replay).read_text())
        sequences = {m: [tuple(f) for f in s] for m, s in doc["sequences"].items()}
        print(f"(1) replaying {a.replay}: {doc['source']}")
    else:
        demo = Path(a.demo)
        if not (demo / "detector_int8.tflite").is_file() or not (demo / "inspection.toml").is_file():
            sys.exit(f"no {demo}/detector_int8.tflite or inspection.toml: run `edgekit demo --out {demo}` first")
        sequences = record(demo, a.frames, a.seed, a.threshold)
        source = (f"the demo's int8 detector and inspection.toml"
                  f"{f' (thresholds {a.threshold})' if a.threshold else ''} on a {a.frames}-frame belt video "
                  f"(make_video seed {a.seed}, 15 fps), per-frame mode and per-part mode")
        print(f"(1) recorded {source}: " + ", ".join(
            f"{m}: {len(s)} frames, {sum(f[1] is not None for f in s)} with a verdict, "
            f"{sum(bool(f[1]) for f in s)} FAIL" for m, s in sequences.items()))
        if a.record:
            Path(a.record).parent.mkdir(parents=True, exist_ok=True)
            Path(a.record).write_text(json.dumps({"source": source, "sequences": sequences}, separators=(",", ":")))
    replay(sequences, a.trials, [int(w) for w in a.windows.split(",")], a.baseline)


if __name__ == "__main__":
    main()
