"""Notebook 08, past one machine: the two-loss recipes under DistributedDataParallel and Accelerate.

Everything that runs on several processes lives in these modules, because a new process (spawned, or forked from a
fork server) imports its function by name and cannot see a notebook's cells: ``recipes`` (the two models),
``reduction`` (when one wrapper writes its averages), ``chained`` (tenc -> unet), ``failures`` (DDP's own errors and
the silent cases next to them, with ``find_unused``: what ``find_unused_parameters=True`` does and costs),
``accelerated`` (the same step under Accelerate), ``watched`` (``ReductionWatch`` on the recipes) and ``exercise``
(the checker, which starts its own processes). ``replicas`` compares what the ranks sent back; ``show`` shows their
code in the notebook; ``torchrun_script`` is a whole training script as ``torchrun`` starts it.
"""
