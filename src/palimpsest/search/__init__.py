"""Shared retrieval: RE2 regular expressions with instruction and work limits (``regex``)."""
