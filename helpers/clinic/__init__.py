"""Notebook 06, the bug clinic: each module holds one case's models, data and plain-torch reference step."""
