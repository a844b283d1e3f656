"""The checking engine: every exercise judged against its reference, in every situation its contract allows.

An exercise declares a ``Contract`` (``contract.py``): how to build the objects one call receives for a situation,
the reference (the solution's own function), and what one call may change. The engine (``judge.py``) builds
identical twins for each generated situation (``situations.py``), runs the learner's function on one and the
reference on the other, observes the whole state of both (``observe.py``) and says what differs, in the learner's
words, from the smallest situation that shows it (``words.py``).

Before that sweep, an exercise's own scenarios (its checker) read a wrong gradient as a mixture of the gradients it
could hold; they are built from ``step_watch.py`` (optimizers that record each step, the optimizer kinds),
``twins.py`` (an optimizer that replays the recorded steps) and ``untouched.py`` (``.grad`` and global settings a
call must leave as they were).
"""
