"""SpecHub's client side: a typed REST client (`spechub.client`) and the `spechub` command (`spechub.cli`).

Both talk to a SpecHub server over its REST API only; `spechub verify` needs no server at all.
Nothing here imports Django, the registry or the workers.
"""
