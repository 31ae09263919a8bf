"""Everything that runs inside a worker process (the launcher starts it in dlbench.launch).

process: set-up (threads, other frameworks blocked, parent-death signal), the
entry point and the result file; steps: the step loop; epochs: time-to-train;
ddp_rank: one DistributedDataParallel rank under torchrun, on the same timer;
check: the output check; placement: where the framework really ran.
"""
