"""Frame-sized buffers handed back to the system when freed, for a process that runs the loop.

glibc's malloc raises its mmap threshold to the size of the largest block freed (up to 32 MB
on 64-bit): after the first decoded frame (640x480x3, 0.9 MB) is freed, later frames come
from the heaps of the threads that decode them (one per THROUGHPUT worker) and are kept there
once freed, so the peak grows by a few frames per thread over a run. Fixing the threshold at
256 KB keeps every frame in its own mapping, returned when freed: `edgekit detect` on a file
(SSD MobileNet v1, two workers) peaked at 97 MB instead of 101-103 MB, for a page fault per
4 KB of each new frame (about 0.1 ms a frame against a 14-28 ms inference).

A setting of the whole process: the command-line tools call it, the library never does.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["release_frames_when_freed"]

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 256 * 1024


def release_frames_when_freed() -> bool:
    """Fix glibc's mmap threshold (see the module); False where malloc is not glibc's."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The symbols this process already has (dlopen(NULL)): the C library Python runs on, whatever
        # its file is called. Not ctypes.util.find_library("c"): it runs `ldconfig -p` in a child
        # process and imports subprocess, shutil and tempfile (5-7 ms of every command's start-up).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl (Alpine) has no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))
