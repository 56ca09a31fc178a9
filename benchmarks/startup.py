"""How fast the `edgekit` command starts, against bare Python doing the same work, in one run.

    python benchmarks/startup.py [--rounds 7] [--model M] [--detector D] [--image I]

Each row runs a fresh process per round and reports the median wall time and the median peak
memory (the child's maximum resident set, from wait4) of:

(a) `edgekit --version`            against  `python -c "import numpy"`;
(b) `edgekit classify` first run   (an empty isolation cache: the child that tries the model runs);
(c) `edgekit classify` later runs  (the file has passed here before: no child, no gray-frame check)
                                   against  a bare 10-line script: the interpreter, Pillow to read
                                            the photo, OpenCV to resize it, invoke, the top 5;
(d) `edgekit detect` on one image (later runs) against the same bare script for the SSD's outputs.

The bare scripts are the commands' twins: the same interpreter with the same thread count
(edgekit's default, every core up to 4), the same decode (Pillow), the same resize (OpenCV,
INTER_AREA from a 3x shrink, else INTER_LINEAR, as edgekit.preprocess decides) and the same
printout (classify: the labels the model's zip carries, as edgekit reads them; detect: one line
of the boxes above 0.5). CPU time (user + system, from wait4) is printed beside wall time: other
programs running distort it least.

Rounds interleave every case and rotate their order, so machine load hits all alike (the load
average is printed; other programs running distort every figure). Targets (issue 26): a <= 1.5x;
c and d <= 1.3x in wall time and in peak memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_line, rotated  # noqa: E402

DATA = ROOT / "tests" / "data"

# argv: model, image, threads. A model with labels carries them in a zip after the flatbuffer.
BARE_CLASSIFY = """
import sys, zipfile, numpy as np, cv2
from PIL import Image
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=int(sys.argv[3])); it.allocate_tensors()
inp, out = it.get_input_details()[0], it.get_output_details()[0]
with zipfile.ZipFile(sys.argv[1]) as z: labels = z.read(z.namelist()[0]).decode().splitlines()
img = np.asarray(Image.open(sys.argv[2]).convert("RGB")); (h, w), (th, tw) = img.shape[:2], inp["shape"][1:3]
area = cv2.INTER_AREA if tw <= w / 3 or th <= h / 3 else cv2.INTER_LINEAR
it.set_tensor(inp["index"], cv2.resize(img, (tw, th), interpolation=area)[None])
it.invoke(); s = it.get_tensor(out["index"])[0]; scale, zero = out["quantization"]; print(sys.argv[2])
for i in np.argsort(s)[::-1][:5]: print(f"  {(int(s[i]) - zero) * scale:7.4f}  {i:4d}  {labels[i]}")
"""

BARE_DETECT = """
import sys, numpy as np, cv2
from PIL import Image
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=int(sys.argv[3])); it.allocate_tensors()
inp, outs = it.get_input_details()[0], it.get_output_details()
img = np.asarray(Image.open(sys.argv[2]).convert("RGB")); (h, w), (th, tw) = img.shape[:2], inp["shape"][1:3]
area = cv2.INTER_AREA if tw <= w / 3 or th <= h / 3 else cv2.INTER_LINEAR
it.set_tensor(inp["index"], cv2.resize(img, (tw, th), interpolation=area)[None])
it.invoke(); boxes, classes, scores, n = (it.get_tensor(o["index"])[0] for o in outs)
print("frame 0", ", ".join(f"{int(c)} {s:.2f} {[int(b[1] * w), int(b[0] * h), int(b[3] * w), int(b[2] * h)]}"
                           for b, c, s in zip(boxes[:int(n)], classes, scores) if s >= 0.5))
"""


def edgekit_argv() -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m edgekit`."""
    script = Path(sys.executable).with_name("edgekit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "edgekit"]


GNU_TIME = shutil.which("time", path="/usr/bin:/bin")


def run_once(argv: list[str], env: dict[str, str], scratch: Path) -> tuple[float, float, float]:
    """Wall seconds, peak resident MB and CPU seconds (user + system) of one child process.

    The peak comes from GNU time (`/usr/bin/time -f %M`), which forks from its own small process:
    a child forked from this Python would carry this process's resident pages into its peak
    (Linux keeps the high-water mark across exec). Without GNU time, wait4's figure is used,
    floored at this process's size (the script says so).
    """
    out = scratch / "maxrss"
    wrapped = [GNU_TIME, "-f", "%M", "-o", str(out), *argv] if GNU_TIME else argv
    t0 = time.perf_counter()
    proc = subprocess.Popen(wrapped, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.strip()}")
    cpu = usage.ru_utime + usage.ru_stime  # GNU time's too: a few ms, alike for every case
    if GNU_TIME:
        return wall, int(out.read_text().split()[-1]) / 1024, cpu
    return wall, usage.ru_maxrss / 1024, cpu  # Linux reports KiB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", default=str(DATA / "mobilenet_v1_0.25_128_quant.tflite"))
    ap.add_argument("--detector", default=str(DATA / "ssd_mobilenet_v1_coco_quant.tflite"))
    ap.add_argument("--image", default=str(DATA / "grace_hopper.png"))
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="edgekit-startup-"))
    warm = scratch / "warm-cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(warm), "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("EDGEKIT_ISOLATE", None)
    ek, py = edgekit_argv(), [sys.executable]
    bare_c, bare_d = scratch / "bare_classify.py", scratch / "bare_detect.py"
    bare_c.write_text(BARE_CLASSIFY)
    bare_d.write_text(BARE_DETECT)
    threads = str(max(1, min(os.cpu_count() or 1, 4)))  # edgekit's default (runtimes.loader.default_threads)
    classify = [*ek, "classify", "-m", args.model, args.image]
    detect = [*ek, "detect", "-m", args.detector, "--source", args.image]
    cases = {
        "a edgekit --version": (ek + ["--version"], None),
        "a python -c 'import numpy'": (py + ["-c", "import numpy"], None),
        "b edgekit classify, first run": (classify, "cold"),
        "c edgekit classify, later runs": (classify, None),
        "c bare classify script": (py + [str(bare_c), args.model, args.image, threads], None),
        "d edgekit detect, later runs": (detect, None),
        "d bare detect script": (py + [str(bare_d), args.detector, args.image, threads], None),
    }
    print(machine_line())
    if not GNU_TIME:
        print("note: no /usr/bin/time here: peak memory is wait4's, floored at this script's own size")
    run_once(classify, env, scratch)  # the files pass isolation once (the cache "later runs" use), and the
    run_once(detect, env, scratch)  # OS has every file in its page cache before round 1
    for argv, _ in cases.values():
        run_once(argv, env, scratch)
    wall: dict[str, list[float]] = {k: [] for k in cases}
    mem: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(args.rounds):
        for name in rotated(list(cases), r):
            argv, cache = cases[name]
            run_env = env
            if cache == "cold":
                cold = scratch / f"cold-{r}"
                run_env = {**env, "XDG_CACHE_HOME": str(cold)}
            w, m, c = run_once(argv, run_env, scratch)
            wall[name].append(w)
            mem[name].append(m)
            cpu[name].append(c)
            if cache == "cold":
                shutil.rmtree(cold, ignore_errors=True)
    med = {k: (statistics.median(wall[k]), statistics.median(mem[k]), statistics.median(cpu[k])) for k in cases}
    print(f"{args.rounds} rounds, medians; model {Path(args.model).name}, detector {Path(args.detector).name}, "
          f"image {Path(args.image).name}, {threads} threads; load average {os.getloadavg()[0]:.2f} at the end")
    print(f"{'case':34} {'wall s':>7} {'peak MB':>8} {'CPU s':>7}")
    for name, (w, m, c) in med.items():
        print(f"{name:34} {w:7.3f} {m:8.1f} {c:7.3f}")
    pairs = [("a", "a edgekit --version", "a python -c 'import numpy'", 1.5),
             ("b", "b edgekit classify, first run", "c bare classify script", None),
             ("c", "c edgekit classify, later runs", "c bare classify script", 1.3),
             ("d", "d edgekit detect, later runs", "d bare detect script", 1.3)]
    print(f"{'ratio':6} {'wall':>6} {'memory':>7} {'CPU':>6}  target")
    for key, ours, bare, target in pairs:
        (w1, m1, c1), (w0, m0, c0) = med[ours], med[bare]
        print(f"{key:6} {w1 / w0:6.2f} {m1 / m0:7.2f} {c1 / c0:6.2f}  {'<= %.1fx' % target if target else '(no target)'}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
