"""The benchmark's sections, one module per family; ``bench.registry`` lists them in order."""
