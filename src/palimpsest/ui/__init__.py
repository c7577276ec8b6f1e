"""The review desk: a web page where people read, review and curate memory (``/ui``).

``pal serve`` mounts :func:`create_desk` at ``/ui`` in the same process as the API, over the
same :class:`~palimpsest.service.memories.MemoryService` and Memory Git flow, so a person sees
exactly what their credential may see: the server decides, never the page. Pages are rendered
on the server from the templates and the one stylesheet shipped in this package; there is no
script, nothing is fetched from elsewhere, and author text is always shown as inert text.

Modules: :mod:`.app` (routes, sign-in), :mod:`.desk` (session, CSRF and origin rules on
requests), :mod:`.pages` (the views), :mod:`.facade` (every call into the service),
:mod:`.sessions` (session policy, CSRF tokens) and :mod:`.worddiff` (pure), :mod:`.render`
(templates, headers). Sessions themselves live in the store (:mod:`palimpsest.service.sessions`).
"""

from palimpsest.ui.app import create_desk
from palimpsest.ui.desk import DeskConfig

__all__ = ["DeskConfig", "create_desk"]
