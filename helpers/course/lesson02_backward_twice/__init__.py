"""Notebook 02, error 1 (backward through the graph a second time): its exercise."""
