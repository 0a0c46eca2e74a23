"""SpecHub's REST API under /api/v1/: one view per operation, input and output serializers."""
