"""Notebook 00, start here: the environment check and the first checked exercise."""
