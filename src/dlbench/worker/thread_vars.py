"""The environment variables that size a process's thread pools, read by OpenMP, MKL
and OpenBLAS when they load: the worker sets them to the case's threads before any
framework loads (worker.process), and a server it starts does not inherit them (the
server's own threads are its backend's: worker.engine_server)."""

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
