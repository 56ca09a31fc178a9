"""Tests of runtimes/ (mirrors the source tree)."""
