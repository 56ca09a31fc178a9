"""Tests of edgekit/contract/ (mirrors the source tree)."""
