"""The history every provenance export test starts from, written through a real service."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow

SECRET = "Quillwort-7 is the vault code"


def world(data: Path) -> tuple[str, dict[str, Any]]:
    """A memory with direct writes, a revision, an erase, a reviewed write merged and an
    agent's own signature; returns its id and the published keys."""
    with MemoryService(data) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.caller(made[0].id)
        mid = svc.create_memory(owner, {"name": "team"})["id"]
        bot = svc.caller(svc.create_member("bot", "agent").id)
        svc.put_grant(owner, mid, {"principal": f"member:{bot.member.id}",
                                   "privileges": ["read", "write"]})
        first = svc.remember(owner, mid, {"type": "fact", "content": "the build runs on Debian"})
        svc.revise(owner, mid, first["id"], {"content": "the build runs on Debian 13",
                                             "reason": "more exact"})
        secret = svc.remember(owner, mid, {"content": SECRET})
        svc.erase(owner, mid, {"record_ids": [secret["id"]]})
        me = new_identity("bot")
        svc.register_key(bot, {"public_key": me.public_key_text})
        svc.remember(bot, mid, {"content": "signed by the agent too"})
        head = svc.list_refs(owner, mid)["data"][0]["head_changeset_id"]
        doc = svc.changeset_signatures(bot, mid, head)
        svc.sign_changeset(bot, mid, head, {"public_key": me.public_key_text, "signature":
                                            b64_nopad(me.sign(base64.b64decode(doc["canonical"])))})
        flow = open_flow(svc)
        who = f"member:{owner.member.id}"
        ReviewedWrites(flow).put_settings(who, mid, {"review_required": True})
        pending = svc.remember(bot, mid, {"content": "deploys need two people"})
        flow.review(who, pending["proposal_id"], {"verdict": "approve"})
        flow.merge(who, mid, flow.authorize(who, pending["proposal_id"], {}))
        svc.create_memory(owner, {"name": "other"})
        return mid, svc.provenance_keys()
