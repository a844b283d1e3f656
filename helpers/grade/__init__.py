"""Grading a room's notebooks: ``python -m helpers.grade DIR`` writes ``DIR/grades.csv`` and ``DIR/grades.html``.

Each notebook runs in a sandbox of its own (bubblewrap), which sees only a private copy of its folder; what comes
back is data: the state before and after each call of the learner's functions, on situations the grader picks with
seeds shifted by a salt the notebook's cells never saw. The grader, which runs no learner code and imports nothing
from the graded folder, makes the reference's calls and compares. See docs/workshop.md, "Grading the room".
"""
