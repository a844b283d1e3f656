"""Notebook 03, error 2 and version counters: its exercise."""
