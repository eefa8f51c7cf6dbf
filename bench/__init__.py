"""Benchmark refmount against fsspec on the same data, in the same run.

Run it with ``scripts/bench`` (options: ``--help``); docs/performance.md explains every figure.
Everything is generated under a temporary directory and removed afterwards; every server
(nginx, s3rver or moto) listens on 127.0.0.1 only and is started and stopped here, as are the
mounts and ``vmtouch``, which keeps the targets resident in the page cache while measuring.

For each target (local files, HTTP, S3) the same keys are read by refmount (the real command,
mounted in a child process), by in-process fsspec ``ReferenceFileSystem.cat`` one key at a time,
by fsspec's own FUSE mount (``fsspec.fuse``, in a child process) and directly from the target
(``os.pread`` or concurrent ranged GETs: the physical limit). The "pyfuse3 floor" serves the same
1 MiB chunks from memory through the least a pyfuse3 filesystem can do
(``bench/fuse_floor.py``): what no pyfuse3 daemon, refmount included, can beat on this
machine. Each measurement is bounded by ``--budget`` seconds: a loop that runs out of time
reports the rate of what it did.
"""
