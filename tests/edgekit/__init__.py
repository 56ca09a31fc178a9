"""Tests of edgekit/ (mirrors the source tree)."""
