"""The zarr v2 view of zarr v3 nodes (``--zarr-format 2``): v2 documents for v3 metadata,
chunks renamed, codecs mapped; pure metadata work, no numpy or numcodecs."""
