"""Soak a real mount: many readers, random reads of HTTP and S3 targets behind fault proxies.

Run it with ``scripts/soak`` (options: ``--help``); docs/performance.md explains every check.
An HTTP range server and a local S3 server (moto) each serve generated objects behind a fault
proxy, all on 127.0.0.1 and started and stopped here. The real ``refmount`` command mounts a
generated reference set to them in a child process; reader threads read random ranges and whole
keys until the deadline and compare every byte with the source, while the daemon's memory,
threads and open file descriptors are sampled from /proc. The verdicts are printed as a table
(and written as JSON with ``--json``); the exit status is 0 when every check passes, 1 when one
fails and 2 when the mount could not be set up.
"""
