"""Tests of edgekit/sinks/ (mirrors the source tree)."""
