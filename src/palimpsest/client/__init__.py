"""``palimpsest.client``: a typed Python client (sync and async) for the whole HTTP API.

:class:`Client` and :class:`AsyncClient` (:mod:`.client`) cover the UHP Memories routes, the
Memory Git ``/api/memory`` routes and the operations routes; answers are typed with the
:mod:`.models` shapes; refusals raise :mod:`palimpsest.errors`. ``pal memories``, ``pal
records``, ``pal recall`` and ``pal memory-git`` are built on it.
"""

from palimpsest.client.client import AsyncClient, Client, read_credential
from palimpsest.client.transport import ANSWERED, DEFAULT_URL
from palimpsest.client.uhp import UNSET

__all__ = ["ANSWERED", "DEFAULT_URL", "UNSET", "AsyncClient", "Client", "read_credential"]
