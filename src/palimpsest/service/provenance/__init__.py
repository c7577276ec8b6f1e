"""Provenance anyone can verify: the server's signing identity, signatures on every accepted
changeset, receipts on the records the service returns, and the offline checks of both."""
