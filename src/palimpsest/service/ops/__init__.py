"""The chapter's operations over :class:`palimpsest.service.core.Core`, one module per concept;
:class:`palimpsest.service.memories.MemoryService` is their front door."""
