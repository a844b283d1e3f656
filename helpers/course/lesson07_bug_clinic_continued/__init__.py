"""Notebook 07, the bug clinic continued: one set-up module and one exercise module per case.

Each case is a pair, ``<case>.py`` (models, data, the broken and the reference step) and ``<case>_exercise.py``
(the checker), as in notebook 06's package.
"""
