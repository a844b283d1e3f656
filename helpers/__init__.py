"""Helpers for the course "Two models, two losses, one graph".

Importing changes nothing: no seeds, no warning filters, no output.
"""
from helpers import exercises
from helpers.expect import expect_error
from helpers.magic import load_ipython_extension

__all__ = ["exercises", "expect_error", "load_ipython_extension"]
