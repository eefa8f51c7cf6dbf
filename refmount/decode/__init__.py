"""``--decode``: a view of the tree in which arrays are served decoded.

Metadata documents are rewritten (no compressor or filters, little-endian, C order, strict
UTF-8 JSON) and each chunk file of an array refmount can decode holds the decoded chunk.
Only a named list of numeric codecs is decoded (``codecs``), always with an output bound;
numcodecs is imported in this package only.
"""
