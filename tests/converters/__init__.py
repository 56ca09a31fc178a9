"""Tests of converters/ (mirrors the source tree)."""
