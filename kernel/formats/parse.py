"""A draft's or verifier's config.json parsed into a typed description.

Pure functions, no I/O. Configs are hostile input: every field is read with a
type check, and a missing or ill-typed field becomes a finding instead of an
exception. Fields the parser does not understand are kept in `extra`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Required, TypedDict, TypeVar

from kernel.formats.fields import Fields, Geometry, brief, read_geometry
from kernel.formats.findings import Finding, error
from kernel.formats.vllm_support import (
    EAGLE3_ARCHITECTURES,
    EAGLE_WRAPPER_METHODS,
    GEMMA4_ASSISTANT_TYPES,
    SPECULATORS_METHOD,
)


class Proposals(TypedDict, total=False):
    """What a speculators_config says: its proposals, and the verifier the head was built for."""

    speculative_tokens: int | None
    proposal_types: tuple[str, ...]
    default_proposal: str | None
    verifier_name: str | None
    verifier_architectures: tuple[str, ...] | None


class Described(Proposals, total=False):
    """DraftFormat's fields as one format's reader found them; each reader sets those its format has."""

    kind: Required[str]
    method: str | None
    algorithm: str | None
    variant: str | None
    architectures: tuple[str, ...] | None
    geometry: Geometry
    n_predict: int | None
    draft_vocab_size: int | None
    target_hidden_size: int | None
    aux_layer_ids: tuple[int, ...] | None


_Item = TypeVar("_Item")


class GeometryDict(TypedDict):
    model_type: str | None
    hidden_size: int | None
    num_layers: int | None
    vocab_size: int | None
    max_positions: int | None


class BuiltFor(TypedDict):
    """The verifier a draft says it was built for."""

    name_or_path: object  # as the config states it, cut short (fields.brief)
    architectures: list[str] | None


class FormatDict(TypedDict):
    """A DraftFormat as Pair.format_metadata and the gate's report hold it."""

    kind: str
    method: str | None
    algorithm: str | None
    variant: str | None
    architectures: list[str] | None
    geometry: GeometryDict
    speculative_tokens: int | None
    n_predict: int | None
    proposal_types: list[str]
    default_proposal: str | None
    verifier: BuiltFor
    draft_vocab_size: int | None
    target_hidden_size: int | None
    aux_layer_ids: list[int] | None
    auto_map: bool
    extra: dict[str, object]  # the fields no reader asked for, each cut short: the publisher's own


@dataclass(frozen=True)
class DraftFormat:
    """A draft described: which format, how vLLM serves it, and what it was built for.

    kind is one of speculators, eagle3 (the raw EAGLE-3 format), eagle_wrapper (vLLM's legacy `model_type: eagle`
    wrapper), gemma4_assistant (Gemma 4's MTP drafter),
    eagle1 (an EAGLE-1 head declaring its base architecture, known by its `fc` tensor), causal_lm, medusa,
    mlp_speculator, none (no draft repo: ngram/suffix) or unreadable. `method` is None when the format names
    no method the pinned vLLM knows.
    """

    kind: str
    method: str | None = None
    algorithm: str | None = None
    variant: str | None = None
    architectures: tuple[str, ...] | None = None
    geometry: Geometry = field(default_factory=Geometry)
    speculative_tokens: int | None = None
    n_predict: int | None = None
    proposal_types: tuple[str, ...] = ()
    default_proposal: str | None = None
    verifier_name: str | None = None
    verifier_architectures: tuple[str, ...] | None = None
    draft_vocab_size: int | None = None
    target_hidden_size: int | None = None
    aux_layer_ids: tuple[int, ...] | None = None
    auto_map: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    problems: tuple[Finding, ...] = ()

    def as_dict(self) -> FormatDict:
        shape = self.geometry
        return {
            "kind": self.kind,
            "method": self.method,
            "algorithm": self.algorithm,
            "variant": self.variant,
            "architectures": _listed(self.architectures),
            "geometry": {
                "model_type": shape.model_type,
                "hidden_size": shape.hidden_size,
                "num_layers": shape.num_layers,
                "vocab_size": shape.vocab_size,
                "max_positions": shape.max_positions,
            },
            "speculative_tokens": self.speculative_tokens,
            "n_predict": self.n_predict,
            "proposal_types": list(self.proposal_types),
            "default_proposal": self.default_proposal,
            "verifier": {"name_or_path": brief(self.verifier_name), "architectures": _listed(self.verifier_architectures)},
            "draft_vocab_size": self.draft_vocab_size,
            "target_hidden_size": self.target_hidden_size,
            "aux_layer_ids": _listed(self.aux_layer_ids),
            "auto_map": self.auto_map,
            "extra": self.extra,
        }


def _listed(values: tuple[_Item, ...] | None) -> list[_Item] | None:
    return None if values is None else list(values)


NO_DRAFT = DraftFormat(kind="none")


def describe_draft(config: object, *, tensors: Collection[str] = (), unreadable: str | None = None) -> DraftFormat:
    """Return the typed description of a draft's config.json; `unreadable` says why it could not be read.

    `tensors` are the names in the draft's safetensors headers: an EAGLE-1 head and a one-layer draft model
    share one config and differ only there.
    """
    if not isinstance(config, dict):
        return DraftFormat(kind="unreadable", problems=(_unreadable("draft", config, unreadable),))
    problems: list[Finding] = []
    fields = Fields(config, "", problems, "gate:format-bad-value")
    if "speculators_model_type" in config:
        described = _speculators(fields)
    elif config.get("model_type") in ("mlp_speculator", "medusa"):
        described = _head(fields, config["model_type"])
    elif config.get("model_type") == "eagle":
        described = _eagle_wrapper(fields)
    elif config.get("model_type") in GEMMA4_ASSISTANT_TYPES:
        described = _gemma4_assistant(fields)
    elif isinstance(config.get("architectures"), list) and EAGLE3_ARCHITECTURES & set(map(str, config["architectures"])):
        described = _raw_eagle3(fields)
    elif EAGLE1_FC in tensors:
        described = {**_causal_lm(fields), "kind": "eagle1", "method": "eagle", "algorithm": "eagle"}
    else:
        described = _causal_lm(fields)
    auto_map = fields.mapping("auto_map") is not None
    return DraftFormat(**described, auto_map=auto_map, extra=fields.unread(), problems=tuple(problems))


def _unreadable(role: str, config: object, why: str | None) -> Finding:
    if role == "verifier":
        why = why or "missing or not a JSON object"
        return error("gate:format-verifier-config", f"The verifier's config.json is unusable: {why}.")
    if config is None and why is None:
        return error("gate:format-config-missing", "The draft has no config.json.")
    return error("gate:format-config-invalid", f"The draft's {why or 'config.json is not a JSON object'}.")


def _speculators(fields: Fields) -> Described:
    algorithm = fields.text("speculators_model_type", required=True)
    speculators = fields.mapping("speculators_config", required=True)
    layer = fields.mapping("transformer_layer_config", required=True)
    described: Described = {
        "kind": "speculators",
        "algorithm": algorithm,
        "method": SPECULATORS_METHOD[algorithm][0] if algorithm in SPECULATORS_METHOD else None,
        "variant": "hass" if algorithm == "eagle" and fields.flag("layernorms") else None,
        "architectures": fields.texts("architectures"),
        # vLLM falls back to Llama defaults (vocab 32000, hidden 4096) for absent sizes: require them.
        "geometry": read_geometry(layer, frozenset({"hidden_size", "vocab_size"})) if layer else Geometry(),
        "draft_vocab_size": fields.integer("draft_vocab_size"),
        "target_hidden_size": fields.integer("target_hidden_size"),
        "aux_layer_ids": _aux_layer_ids(fields, algorithm),
    }
    fields.flag("norm_before_residual")
    for key in ("speculators_version", "dtype", "torch_dtype"):
        fields.read.add(key)
    if algorithm in ("peagle", "dflash", "dflash2", "dspark"):
        fields.integer("mask_token_id", required=True, minimum=0)
    if speculators:
        return {**described, **_proposals(speculators)}
    return described


def _aux_layer_ids(fields: Fields, algorithm: str | None) -> tuple[int, ...] | None:
    if algorithm in ("dflash", "dflash2", "dspark"):
        return fields.integers("aux_hidden_state_layer_ids", required=True)
    return fields.integers("eagle_aux_hidden_state_layer_ids")


def _proposals(speculators: Fields) -> Proposals:
    described: Proposals = {}
    speculators.text("algorithm")
    methods = speculators.document.get("proposal_methods")
    speculators.read.add("proposal_methods")
    if not isinstance(methods, list) or not methods or not all(isinstance(m, dict) for m in methods):
        speculators.problems.append(
            error("gate:format-missing-key", "speculators_config.proposal_methods must be a non-empty list of objects.")
        )
    else:
        first = Fields(methods[0], "speculators_config.proposal_methods[0].", speculators.problems, speculators.code)
        described["speculative_tokens"] = first.integer("speculative_tokens", required=True)
        types = [Fields(m, "", [], speculators.code).text("proposal_type") for m in methods]
        described["proposal_types"] = tuple(t for t in types if t)
    described["default_proposal"] = speculators.text("default_proposal_method")
    verifier = speculators.mapping("verifier", required=True)
    if verifier:
        described["verifier_name"] = verifier.text("name_or_path", required=True)
        described["verifier_architectures"] = verifier.texts("architectures")
    return described


def _head(fields: Fields, model_type: str) -> Described:
    """An mlp_speculator or medusa head; `model_type`, which chose this reader, is its kind."""
    fields.text("model_type")
    n_predict = fields.integer("n_predict") if model_type == "mlp_speculator" else _medusa_heads(fields)
    geometry = Geometry(
        model_type=model_type,
        hidden_size=fields.integer("hidden_size") or fields.integer("emb_dim"),
        vocab_size=fields.integer("vocab_size", required=True),
    )
    return {
        "kind": model_type,
        "method": model_type,
        "algorithm": model_type,
        "architectures": fields.texts("architectures"),
        "geometry": geometry,
        "n_predict": n_predict,
        "speculative_tokens": n_predict,
    }


def _medusa_heads(fields: Fields) -> int | None:
    for key in ("num_heads", "medusa_num_heads"):
        if key in fields.document:
            return fields.integer(key)
    return fields.integer("num_heads", required=True)


def _raw_eagle3(fields: Fields) -> Described:
    """The raw EAGLE-3 format: the layer's fields at the top level, the aux layer ids in `eagle_config`."""
    eagle = fields.mapping("eagle_config")
    if eagle:
        eagle.flag("use_aux_hidden_state")
    return {
        "kind": "eagle3",
        "method": "eagle3",
        "algorithm": "eagle3",
        "architectures": fields.texts("architectures", required=True),
        # vLLM falls back to Llama defaults (vocab 32000, hidden 4096) for absent sizes: require them.
        "geometry": read_geometry(fields, frozenset({"hidden_size", "vocab_size"})),
        "draft_vocab_size": fields.integer("draft_vocab_size"),
        "target_hidden_size": fields.integer("target_hidden_size"),
        "aux_layer_ids": (eagle or fields).integers("eagle_aux_hidden_state_layer_ids"),  # vLLM reads either place
    }


def _causal_lm(fields: Fields) -> Described:
    geometry = read_geometry(fields, frozenset({"vocab_size"}))
    architectures = fields.texts("architectures", required=True)
    return {"kind": "causal_lm", "method": "draft_model", "algorithm": "draft_model", "architectures": architectures,
            "geometry": geometry}  # fmt: skip


def _gemma4_assistant(fields: Fields) -> Described:
    """Gemma 4's MTP assistant (Google's `gemma4_assistant` layout): a small decoder over the verifier's last hidden
    state and KV cache; `backbone_hidden_size` is the verifier's hidden size, which vLLM's gemma4_mtp projects from."""
    model_type = fields.text("model_type")
    text = fields.mapping("text_config", required=True)
    for key in ("use_ordered_embeddings", "tie_word_embeddings"):
        fields.flag(key)
    for key in ("num_centroids", "centroid_intermediate_top_k", "dtype", "torch_dtype"):
        fields.read.add(key)
    return {
        "kind": "gemma4_assistant",
        "method": "mtp",
        "algorithm": model_type,  # gemma4_assistant or gemma4_unified_assistant; vLLM builds gemma4_mtp from either
        "architectures": fields.texts("architectures"),
        "geometry": read_geometry(text, frozenset({"hidden_size", "vocab_size"})) if text else Geometry(),
        "target_hidden_size": fields.integer("backbone_hidden_size", required=True, minimum=1),
        "n_predict": 1,
    }


# The tensor that makes a one-layer causal LM an EAGLE-1 head: the projection of [embedding, verifier hidden state].
EAGLE1_FC = "fc.weight"


def _eagle_wrapper(fields: Fields) -> Described:
    """vLLM's legacy wrapper: the head's config under `model`; vLLM ignores the wrapper's own architectures."""
    fields.texts("architectures")
    fields.read.add("truncated_vocab_size")
    method = fields.text("method") or "eagle"  # EAGLEConfig's default
    model = fields.mapping("model", required=True)
    inner = _causal_lm(model) if model else Described(kind="eagle_wrapper", architectures=None, geometry=Geometry())
    if model and model.document.get("model_type") is None:  # AutoConfig.for_model needs it
        fields.problems.append(error("gate:format-missing-key", "model.model_type is missing."))
    known = method in EAGLE_WRAPPER_METHODS
    return {**inner, "kind": "eagle_wrapper", "method": method if known else None, "algorithm": method}


@dataclass(frozen=True)
class VerifierFacts:
    """What the gate needs from the verifier's config.json."""

    architectures: tuple[str, ...] | None
    geometry: Geometry
    problems: tuple[Finding, ...] = ()


def describe_verifier(config: object, *, unreadable: str | None = None) -> VerifierFacts:
    """Return the verifier's architecture and shape; nested text_config is read for multimodal models."""
    problems: list[Finding] = []
    if not isinstance(config, dict):
        problem = _unreadable("verifier", config, unreadable)
        return VerifierFacts(architectures=None, geometry=Geometry(), problems=(problem,))
    fields = Fields(config, "verifier ", problems, "gate:format-verifier-config")
    architectures = fields.texts("architectures", required=True)
    text = config.get("text_config")
    shape = Fields(text, "verifier text_config.", problems, fields.code) if isinstance(text, dict) else fields
    geometry = read_geometry(shape, frozenset({"hidden_size", "num_hidden_layers", "vocab_size"}))
    return VerifierFacts(architectures=architectures, geometry=geometry, problems=tuple(problems))
