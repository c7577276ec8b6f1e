"""The memory service: UHP Memories over an embedded store whose history is Memory Git
changesets. Start at :class:`palimpsest.service.memories.MemoryService`."""

from palimpsest.service.memories import MemoryService

__all__ = ["MemoryService"]
