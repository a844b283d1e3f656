"""Notebook 06, the bug clinic: one set-up module, one exercise module and one contract module per case.

Each case is ``<case>.py`` (models, data, the broken and the reference step), ``<case>_exercise.py`` (the checker)
and ``<case>_contract.py`` (what the checking engine judges the answer against; ``step_contract.py`` holds what the
three training steps' contracts share), so a case moves to another notebook by moving its files to that notebook's
package (as distillation, multi-task and the in-place activation moved to notebook 07).
"""
