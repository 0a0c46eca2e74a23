"""The transparency log: an RFC 9162 Merkle tree of every certificate and revocation, and its C2SP checkpoints."""
