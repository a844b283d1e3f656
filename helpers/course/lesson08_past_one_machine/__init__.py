"""Notebook 08, past one machine: the two-loss recipes under DistributedDataParallel and Accelerate.

Everything that runs on several processes lives in these modules, because a spawned process imports its function
by name and cannot see a notebook's cells: ``recipes`` (the two models), ``chained`` (tenc -> unet), ``failures``
(DDP's own errors), ``accelerated`` (the same step under Accelerate) and ``exercise`` (the checker, which starts its
own processes). ``replicas`` compares what the ranks sent back; ``show`` shows their code in the notebook.
"""
