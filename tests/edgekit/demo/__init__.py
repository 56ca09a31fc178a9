"""Tests of edgekit/demo/ (mirrors the source tree)."""
