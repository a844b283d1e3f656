"""Grading a room's notebooks: ``python -m helpers.grade DIR`` writes ``DIR/grades.csv`` and ``DIR/grades.html``.

Each notebook runs in a fresh, limited kernel of its own; the answers it defines are then checked by the course's
checkers in a separate, clean process, on seeds the notebook never saw. Nothing a notebook printed or stored counts.
See docs/workshop.md, "Grading the room".
"""
