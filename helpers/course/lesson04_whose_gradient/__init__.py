"""Notebook 04, whose gradient: the recipes and their benchmark, and the exercise."""
