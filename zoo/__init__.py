"""The toy model zoo: a tiny tokenizer, a Llama verifier, drafts and EAGLE-3 heads,
trained on CPU from a seeded synthetic corpus, plus deliberately broken repos."""

ORG = "spechub-toy"
