"""Fuzzing the model loader: seed models, mutators, and a runner that survives crashes.

The short run is tests/runtimes/test_fuzz_loader.py; the long one is ``python -m tests.fuzz``
(or benchmarks/fuzz_loader.py), which saves every crashing file to a findings folder.
Needs the ``flatbuffers`` package and ai-edge-litert's schema module (both come with
ai-edge-litert) to build and rewrite models.
"""
