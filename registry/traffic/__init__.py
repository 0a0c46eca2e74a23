"""Users' own traffic on the registry side: one home for its writes, reads, report, pages and API.

- `services`: uploads (read, checked, sampled, rendered and stored once), certifying a workload, deleting it,
  and handing a run its stored sample (kernel.traffic.handoff);
- `selectors`: what the owner may see;
- `report`: the drafts measured on one workload compared, and the recommendation;
- `views` and `api`: the pages and the REST endpoints.

The kernel's side (the formats, the sample, the chat template, the hand-off) is kernel.traffic.
"""
