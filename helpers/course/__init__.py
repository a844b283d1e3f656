"""The course's lessons: what the notebooks set up, and the exercises with their checkers.

- ``exercises``: ``check``, ``hint`` and ``ids``, and what every checker is built from;
- ``models``, ``device``, ``recording``, ``predict``: shared by several lessons;
- ``lessonNN_topic``: one package per notebook ``NN_topic``, holding its set-up and its checkers together.

Tools for teachers that reuse the checkers (a grader, say) belong here too, beside the checkers.
"""
