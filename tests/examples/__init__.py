"""Tests of examples/ (mirrors the source tree)."""
