"""The authoring kit: what writes and measures the course, never imported by learners or by ``helpers``.

Run from the repository root: ``python -m authoring.generate`` (student copies, solutions.json, badges),
``python -m authoring.release`` (the release step), ``python -m authoring.bench`` (time and memory per notebook).
"""
