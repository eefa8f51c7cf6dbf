"""Targets: where the bytes of references are read from, and where reference sets come from.

``store`` reads ranges, whole objects and sizes of target URLs (fsspec or ``obstore_engine``
for each URL, ``bounded`` HTTP and S3 streams, ``local_files`` through descriptors kept open,
``bridge`` between trio and fsspec's loop, ``failures`` for what an error means, ``pins`` for
versions); ``options`` and ``roots`` decide what a URL gets and may read; ``sources`` reads
the reference file itself. Only this package imports fsspec, s3fs and obstore.
"""
