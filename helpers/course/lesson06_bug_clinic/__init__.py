"""Notebook 06, the bug clinic: one set-up module and one exercise module per case.

Each case is a pair, ``<case>.py`` (models, data, the broken and the reference step) and ``<case>_exercise.py``
(the checker), so a case moves to another notebook by moving its pair to that notebook's package
(as distillation, multi-task and the in-place activation moved to notebook 07).
"""
