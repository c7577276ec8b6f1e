"""Fuzz targets (atheris) for every decoder that meets outside bytes; see docs/security.md.

``python -m tests.fuzz list`` names them, ``python -m tests.fuzz run --seconds 600 TARGET``
fuzzes one for longer, ``make fuzz`` runs them all; ``tests/fuzz/test_fuzz.py`` runs each for a
bounded number of iterations inside ``make test``.
"""
