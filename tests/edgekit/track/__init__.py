"""Tests of edgekit/track/ (mirrors the source tree)."""
