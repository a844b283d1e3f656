"""Notebook 01, the graph and its saved tensors: its exercise (the models are the course's shared two models)."""
