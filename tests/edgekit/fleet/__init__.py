"""Tests of edgekit/fleet/ (mirrors the source tree)."""
