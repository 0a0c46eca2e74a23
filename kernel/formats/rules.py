"""The compatibility gate's rules: small pure functions from parsed metadata to findings.

A rule's contract:
- it takes a `Context` (the gate input plus the parsed draft and verifier) and
  returns an iterable of `Finding`s; it never does I/O and never raises on odd
  input: anything the parser could not type is already a `format` finding, and
  a rule skips what it lacks;
- every code it emits is `gate:<rule>-<what>` and has a hint in findings.HINTS;
- severity error refuses the pair, warning and info only inform.

To add a rule: write one function here, append it to RULES, add its codes to
HINTS, and add one test under tests/kernel/formats/.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kernel.formats.chat_template import template_rule
from kernel.formats.families import family_rule
from kernel.formats.fields import brief
from kernel.formats.findings import Finding, error, info, warning
from kernel.formats.inputs import GateInput, RepoMetadata, TensorData, is_repo_id, tokenizer_hash
from kernel.formats.options import lossless_rule, options_rule
from kernel.formats.parse import DraftFormat, VerifierFacts
from kernel.formats.quantization import quantization_rule
from kernel.formats.vllm_support import (
    CAUSAL_LM_ARCHITECTURES,
    DRAFTLESS_METHODS,
    EAGLE1_ARCHITECTURES,
    EAGLE1_LLAMA_TENSOR,
    EAGLE3_ARCHITECTURES,
    EAGLE3_LAYER_MODEL_TYPES,
    EAGLE_WRAPPER_METHODS,
    MAX_SPECULATIVE_TOKENS,
    METHODS,
    SPECULATORS_LEGACY_TYPES,
    SPECULATORS_TYPES,
    UNSERVED_METHODS,
    VLLM_VERSION,
)

EAGLE_FAMILY = frozenset({"eagle", "eagle3", "peagle", "dflash", "dflash2", "dspark"})
# Formats that carry an EAGLE-family head vLLM builds natively: the speculators format, the raw EAGLE-3 one, an EAGLE-1
# head declaring its base architecture, and vLLM's legacy eagle wrapper.
EAGLE_HEAD_KINDS = frozenset({"speculators", "eagle3", "eagle1", "eagle_wrapper"})
# The heads vLLM's registry has for what EAGLEConfig builds from a head's base architecture, by method.
WRAPPED = {"eagle": EAGLE1_ARCHITECTURES, "eagle3": EAGLE3_ARCHITECTURES}
# DFlash/DSpark number target layers from 1 (vLLM uses aux_id - 1).
ONE_BASED_AUX = frozenset({"dflash", "dflash2", "dspark"})
INTEGER_DTYPES = {"I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64"}


@dataclass(frozen=True)
class Context:
    """The gate input with both configs parsed once."""

    input: GateInput
    method: str | None
    k: int
    draft: DraftFormat
    verifier: VerifierFacts


Rule = Callable[[Context], Iterable[Finding]]


def format_rule(ctx: Context) -> Iterator[Finding]:
    """The draft's format parses, names a proposal method, and the pinned vLLM serves it."""
    yield from ctx.draft.problems
    yield from ctx.verifier.problems
    yield from _draft_presence(ctx)
    fmt = ctx.draft
    if fmt.kind == "speculators":
        yield from _speculators_support(fmt)
    if fmt.kind in ("eagle1", "eagle_wrapper"):
        yield from _eagle_support(fmt, ctx.input.draft)
    if fmt.kind == "causal_lm" and not fmt.auto_map and fmt.architectures:
        # With auto_map the safety rule owns an unknown architecture: it needs repo code.
        unknown = [a for a in fmt.architectures if a not in CAUSAL_LM_ARCHITECTURES]
        if unknown:
            yield error("gate:format-unsupported", f"vLLM {VLLM_VERSION} implements no architecture {unknown}.")
    if ctx.method is None:
        if fmt.kind not in ("unreadable", "speculators", "eagle_wrapper", "none"):  # these say why themselves
            yield error("gate:format-unknown", "No speculative method could be derived from the draft's config.")
        return
    if ctx.method not in METHODS or ctx.method in UNSERVED_METHODS:
        yield error("gate:format-unsupported", f"vLLM {VLLM_VERSION} does not serve method {ctx.method!r}.")
    elif fmt.method and fmt.method != ctx.method:
        yield error("gate:format-method-mismatch", f"The pair asks for {ctx.method!r} but the draft is a {fmt.method!r} draft.")


def _draft_presence(ctx: Context) -> Iterator[Finding]:
    if ctx.input.draft is None and ctx.method not in DRAFTLESS_METHODS:
        yield error("gate:format-unknown", f"Method {ctx.method!r} needs a draft repo; name one, or use ngram or suffix.")
    elif ctx.input.draft is not None and ctx.method in DRAFTLESS_METHODS:
        yield error("gate:format-method-mismatch", f"Method {ctx.method!r} uses no draft repo; leave the draft out.")


def _speculators_support(fmt: DraftFormat) -> Iterator[Finding]:
    if fmt.algorithm in SPECULATORS_LEGACY_TYPES or (fmt.algorithm and fmt.algorithm not in SPECULATORS_TYPES):
        supported = ", ".join(sorted(SPECULATORS_TYPES))
        yield error(
            "gate:format-unsupported",
            f"vLLM {VLLM_VERSION} cannot load speculators_model_type {fmt.algorithm!r} (it loads {supported}).",
        )
    layer_type = fmt.geometry.model_type or "llama"  # vLLM's own default
    if fmt.algorithm in ("eagle3", "peagle") and layer_type not in EAGLE3_LAYER_MODEL_TYPES:
        yield error(
            "gate:format-unsupported",
            f"vLLM {VLLM_VERSION} builds {fmt.algorithm} heads from transformer_layer_config.model_type "
            f"{sorted(EAGLE3_LAYER_MODEL_TYPES)}, not {layer_type!r}.",
        )
    if fmt.proposal_types and fmt.default_proposal is not None and fmt.default_proposal not in fmt.proposal_types:
        yield error(
            "gate:format-default-proposal",
            f"default_proposal_method {fmt.default_proposal!r} is not among the proposal types {list(fmt.proposal_types)}.",
        )


def eagle_architectures(fmt: DraftFormat) -> list[str]:
    """The architectures vLLM's EAGLEConfig builds for a head declaring `fmt.architectures` (LlamaForCausalLM → EagleLlama…)."""
    if fmt.algorithm == "eagle":
        return [a if a.startswith("Eagle") else f"Eagle{a}" for a in fmt.architectures or ()]
    return [a if a.startswith("Eagle3") or a.endswith("Eagle3") else f"Eagle3{a}" for a in fmt.architectures or ()]


def _eagle_support(fmt: DraftFormat, draft: RepoMetadata | None) -> Iterator[Finding]:
    if fmt.algorithm not in EAGLE_WRAPPER_METHODS:
        yield error("gate:format-unsupported", f"vLLM {VLLM_VERSION}'s EAGLE wrapper raises on method {fmt.algorithm!r} "
                    f"(it takes {sorted(EAGLE_WRAPPER_METHODS)}).")  # fmt: skip
    elif fmt.algorithm not in WRAPPED:
        yield error("gate:format-unsupported", f"SpecHub reads {fmt.algorithm} heads in the speculators format only, not in "
                    "the legacy eagle wrapper.")  # fmt: skip
    elif (built := eagle_architectures(fmt)) and not set(built) <= WRAPPED[fmt.algorithm]:
        yield error("gate:format-unsupported", f"vLLM {VLLM_VERSION} builds this {fmt.algorithm} head as {built}, which it does "
                    f"not implement (it has {sorted(WRAPPED[fmt.algorithm])}).")  # fmt: skip
    elif "EagleLlamaForCausalLM" in built and draft is not None:
        yield from _eagle1_tensors(draft)


_EAGLE1_LLAMA_TENSOR = re.compile(EAGLE1_LLAMA_TENSOR)


def _eagle1_tensors(draft: RepoMetadata) -> Iterator[Finding]:
    names = sorted({name for header in draft.safetensors.values() for name in header})
    if names and "fc.weight" not in names:
        yield error("gate:format-head-tensors", "The EAGLE-1 head has no fc.weight: vLLM would run it with an unset fc.")
    unplaced = [name for name in names if not _EAGLE1_LLAMA_TENSOR.fullmatch(name)]
    if unplaced:
        shown = ", ".join(brief(name) for name in unplaced[:5]) + (f" and {len(unplaced) - 5} more" if len(unplaced) > 5 else "")
        yield error("gate:format-head-tensors", f"vLLM {VLLM_VERSION}'s EagleLlamaForCausalLM has no place for {shown}; "
                    "loading the head raises.")  # fmt: skip


_LOCAL_PATH = re.compile(r"^(?:[/~.]|[A-Za-z]:[\\/])|\\")


def verifier_rule(ctx: Context) -> Iterator[Finding]:
    """A speculator names its verifier by Hub repo id, and it is this pair's verifier."""
    fmt = ctx.draft
    if fmt.kind != "speculators" or fmt.verifier_name is None:
        return
    name = fmt.verifier_name
    if _LOCAL_PATH.match(name) or not is_repo_id(name):
        yield error("gate:verifier-local-path", f"verifier.name_or_path {brief(name)!r} is a local path, not a Hub repo id.")
    elif name.casefold() != ctx.input.verifier_id.casefold():
        pair_verifier = ctx.input.verifier_id
        yield error("gate:verifier-name-mismatch", f"The draft names verifier {name!r}; this pair's is {pair_verifier!r}.")
    declared, actual = fmt.verifier_architectures, ctx.verifier.architectures
    if declared == ():
        yield warning("gate:verifier-architectures-empty", "verifier.architectures is empty, so it cannot be checked.")
    elif declared and actual and not set(declared) & set(actual):
        yield error(
            "gate:verifier-architectures-mismatch",
            f"The draft was built for {list(declared)}; the verifier is {list(actual)}.",
        )


def tokenizer_rule(ctx: Context) -> Iterator[Finding]:
    """Draft and verifier share the same vocab content and special ids; draft_model needs equal sizes."""
    draft = ctx.input.draft
    if draft is None or ctx.draft.kind == "unreadable":
        return
    yield from _tokenizer_content(ctx, draft)
    ours, theirs = ctx.draft.geometry.special_ids, ctx.verifier.geometry.special_ids
    differing = [key for key in ours if ours[key] is not None and theirs.get(key) is not None and ours[key] != theirs[key]]
    if differing:
        shown = ", ".join(f"{k} {list(ours[k] or ())} vs {list(theirs[k] or ())}" for k in differing)
        yield error("gate:tokenizer-special-ids", f"Special token ids differ from the verifier's: {shown}.")
    sizes = ctx.draft.geometry.vocab_size, ctx.verifier.geometry.vocab_size
    if ctx.method == "draft_model" and None not in sizes and sizes[0] != sizes[1]:
        yield error("gate:tokenizer-vocab-size", f"The draft's vocab_size is {sizes[0]}; the verifier's is {sizes[1]}.")


def _tokenizer_content(ctx: Context, draft: RepoMetadata) -> Iterator[Finding]:
    if draft.tokenizer is None:
        if ctx.draft.kind == "causal_lm":
            yield warning("gate:tokenizer-not-shipped", "The draft ships no tokenizer.json; only sizes and ids were compared.")
        else:
            yield info("gate:tokenizer-shared", "The head uses the verifier's tokenizer.")
        return
    if ctx.input.verifier.tokenizer is None:
        return
    ours = tokenizer_hash(draft.tokenizer, draft.tokenizer_config)
    theirs = tokenizer_hash(ctx.input.verifier.tokenizer, ctx.input.verifier.tokenizer_config)
    if ours != theirs:
        yield error(
            "gate:tokenizer-content",
            f"The draft's tokenizer differs from the verifier's in content (hash {ours[:12]} vs {theirs[:12]}).",
        )


def mapping_rule(ctx: Context) -> Iterator[Finding]:
    """A reduced draft vocab ships t2d/d2t tensors that map it into the verifier vocab."""
    draft_vocab, target_vocab = ctx.draft.draft_vocab_size, ctx.verifier.geometry.vocab_size
    if draft_vocab is None or target_vocab is None or draft_vocab == target_vocab:
        return
    t2d, d2t = ctx.input.tensors.get("t2d"), ctx.input.tensors.get("d2t")
    if t2d is None or d2t is None:
        missing = [name for name, t in (("t2d", t2d), ("d2t", d2t)) if t is None]
        yield error(
            "gate:mapping-missing", f"draft_vocab_size {draft_vocab} ≠ verifier vocab {target_vocab}, but {missing} are absent."
        )
        return
    yield from _t2d(t2d, draft_vocab, target_vocab)
    yield from _d2t(d2t, draft_vocab, target_vocab)


def _t2d(t2d: TensorData, draft_vocab: int, target_vocab: int) -> Iterator[Finding]:
    if t2d.problem:
        yield error("gate:mapping-t2d", f"t2d: {t2d.problem}")
    elif t2d.dtype not in ("BOOL", "U8") or t2d.shape != (target_vocab,):
        yield error("gate:mapping-t2d", f"t2d is {t2d.dtype}{list(t2d.shape)}; expected BOOL[{target_vocab}].")
    elif (total := sum(1 for v in t2d.values if v)) != draft_vocab:
        yield error("gate:mapping-t2d", f"t2d marks {total} verifier tokens; draft_vocab_size is {draft_vocab}.")


def _d2t(d2t: TensorData, draft_vocab: int, target_vocab: int) -> Iterator[Finding]:
    if d2t.problem:
        yield error("gate:mapping-d2t", f"d2t: {d2t.problem}")
        return
    if d2t.dtype not in INTEGER_DTYPES or d2t.shape != (draft_vocab,):
        yield error("gate:mapping-d2t", f"d2t is {d2t.dtype}{list(d2t.shape)}; expected an integer tensor [{draft_vocab}].")
        return
    outside = [k for k, offset in enumerate(d2t.values) if not 0 <= k + offset < target_vocab]
    if outside:
        yield error(
            "gate:mapping-d2t",
            f"{len(outside)} draft ids map outside the verifier vocab [0, {target_vocab}), first at k={outside[0]}.",
        )


def geometry_rule(ctx: Context) -> Iterator[Finding]:
    """An EAGLE-family head fits the verifier's hidden size, layers and vocab; context is compared for all."""
    fmt, target = ctx.draft, ctx.verifier.geometry
    if fmt.kind in EAGLE_HEAD_KINDS and fmt.algorithm in EAGLE_FAMILY:
        yield from _hidden_size(ctx)
        yield from _aux_layers(fmt, target.num_layers)
        if None not in (fmt.geometry.vocab_size, target.vocab_size) and fmt.geometry.vocab_size != target.vocab_size:
            where = {"speculators": "transformer_layer_config.", "eagle_wrapper": "model."}.get(fmt.kind, "") + "vocab_size"
            yield error(
                "gate:geometry-vocab-size", f"{where} is {fmt.geometry.vocab_size}; the verifier's is {target.vocab_size}."
            )
    ours, theirs = fmt.geometry.max_positions, target.max_positions
    if ours is not None and theirs is not None and ours < theirs:
        yield warning("gate:geometry-context", f"The draft's context is {ours} positions; the verifier's is {theirs}.")


def _hidden_size(ctx: Context) -> Iterator[Finding]:
    fmt, target = ctx.draft, ctx.verifier.geometry.hidden_size
    built_for = fmt.target_hidden_size or fmt.geometry.hidden_size
    if target is None or built_for is None:
        return
    if built_for != target:
        yield error("gate:geometry-hidden-size", f"The head is built for hidden size {built_for}; the verifier's is {target}.")
        return
    draft = ctx.input.draft
    fc_file = draft.tensor_file("fc.weight") if draft else None
    # EAGLE-3's fc takes the aux layers' hidden states; EAGLE-1's the token's embedding and the last hidden state.
    inputs = {"eagle3": len(fmt.aux_layer_ids or (0, 0, 0)), "eagle": 2}.get(fmt.algorithm or "")
    if draft and fc_file and inputs:
        shape = draft.safetensors[fc_file]["fc.weight"].get("shape")
        if not isinstance(shape, list) or len(shape) != 2 or shape[1] != inputs * target:
            yield error(
                "gate:geometry-weights", f"fc.weight has shape {brief(shape)}; the config implies [*, {inputs * target}]."
            )


def _aux_layers(fmt: DraftFormat, layers: int | None) -> Iterator[Finding]:
    if layers is None:
        return
    ids, low = fmt.aux_layer_ids, 1 if fmt.algorithm in ONE_BASED_AUX else 0
    if ids is None and fmt.algorithm in ("eagle3", "peagle"):
        ids = (2, layers // 2, layers - 3)
        if _aux_layers_fit(ids, low, layers):
            yield info("gate:geometry-aux-default", f"No aux layer ids; vLLM uses its default {list(ids)} for {layers} layers.")
            return
    if ids is not None and not _aux_layers_fit(ids, low, layers):
        yield error(
            "gate:geometry-aux-layers",
            f"Aux layer ids {list(ids)} must be unique, increasing and within [{low}, {layers + low}) "
            f"(the verifier has {layers} layers).",
        )


def _aux_layers_fit(ids: tuple[int, ...], low: int, layers: int) -> bool:
    return len(set(ids)) == len(ids) and list(ids) == sorted(ids) and all(low <= i < layers + low for i in ids)


def safety_rule(ctx: Context) -> Iterator[Finding]:
    """Nothing is served by running repo code or unpickling weights, and every file name is plain."""
    for role, repo in (("draft", ctx.input.draft), ("verifier", ctx.input.verifier)):
        if repo is None:
            continue
        for name in repo.unsafe_files:
            yield error("gate:safety-unsafe-filename", f"The {role} repo holds a file named {name!r}.")
        if not repo.safetensors_files and (repo.files or role == "draft"):
            pickles = f" (only {repo.pickle_files})" if repo.pickle_files else ""
            yield error("gate:safety-no-safetensors", f"The {role} repo has no safetensors weights{pickles}.")
    yield from _remote_code(ctx.draft, ctx.input.draft)


def _remote_code(fmt: DraftFormat, draft: RepoMetadata | None) -> Iterator[Finding]:
    if draft is None:
        return
    native = fmt.kind in EAGLE_HEAD_KINDS or all(a in CAUSAL_LM_ARCHITECTURES for a in fmt.architectures or ())
    if fmt.auto_map and native:
        yield info("gate:safety-auto-map", "The config's auto_map is ignored: vLLM loads this format natively.")
    elif fmt.auto_map:
        yield error(
            "gate:safety-remote-code",
            f"Architecture {list(fmt.architectures or ())} exists only as code in the repo ({draft.code_files or 'auto_map'}).",
        )
    elif draft.code_files:
        yield info("gate:safety-code-files", f"The repo ships {draft.code_files}; SpecHub never runs them.")


def k_rule(ctx: Context) -> Iterator[Finding]:
    """num_speculative_tokens is in range, divisible by n_predict where vLLM needs it."""
    k, fmt = ctx.k, ctx.draft
    if not 1 <= k <= MAX_SPECULATIVE_TOKENS:
        yield error("gate:k-range", f"num_speculative_tokens is {k}; SpecHub certifies 1 to {MAX_SPECULATIVE_TOKENS}.")
        return
    if fmt.n_predict and k > fmt.n_predict and k % fmt.n_predict:
        yield error("gate:k-divisible", f"num_speculative_tokens {k} is not divisible by n_predict {fmt.n_predict}.")
    if fmt.kind == "speculators" and fmt.speculative_tokens and fmt.speculative_tokens != k:
        yield info("gate:k-trained", f"The head was configured for {fmt.speculative_tokens} tokens; certifying k={k}.")


RULES: list[Rule] = [format_rule, verifier_rule, tokenizer_rule, mapping_rule, geometry_rule, safety_rule, k_rule, lossless_rule,
                     options_rule, template_rule, quantization_rule, family_rule]  # fmt: skip
