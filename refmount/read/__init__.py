"""Turning reads of references into bytes: the reader, its byte cache and prefetch."""
