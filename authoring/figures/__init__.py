"""The course's conceptual figures, drawn with matplotlib (the authoring kit only: learners get the images).

``python -m authoring.figures`` draws them into ``helpers/course/figures/images/``; ``--check`` fails when the
shipped images differ from what the code draws. ``facts.py`` holds what each figure states (the tests check it
against PyTorch), ``palette.py`` its colours, ``drawing.py`` the shared primitives, one module per figure.
"""
