"""Tests of edgekit/inspect/ (mirrors the source tree)."""
