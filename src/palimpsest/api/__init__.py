"""The HTTP face of the memory service (UHP Memories over FastAPI). Only this package knows
HTTP; see :func:`palimpsest.api.app.create_app`."""
