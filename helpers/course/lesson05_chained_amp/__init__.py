"""Notebook 05, the chained text encoder -> UNet case: the modules and losses, and the exercise."""
