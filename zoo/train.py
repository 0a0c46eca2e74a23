"""Training loops for the toy zoo: the verifier, a distilled draft and EAGLE-3 heads."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from transformers import LlamaForCausalLM

from zoo.eagle3 import Eagle3Head

TTT_STEPS = 3


@dataclass(frozen=True)
class Schedule:
    steps: int
    batch: int = 16
    lr: float = 3e-3
    warmup: int = 20


def batches(data: torch.Tensor, schedule: Schedule, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Yield `schedule.steps` random batches of rows from `data` (rows x seq_len)."""
    for _ in range(schedule.steps):
        yield data[torch.randint(0, data.shape[0], (schedule.batch,), generator=generator)]


def _optimizer(
    params: list[torch.nn.Parameter], schedule: Schedule
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    optimizer = torch.optim.AdamW(params, lr=schedule.lr, weight_decay=0.01)

    def factor(step: int) -> float:
        if step < schedule.warmup:
            return (step + 1) / schedule.warmup
        progress = (step - schedule.warmup) / max(1, schedule.steps - schedule.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _update(loss: torch.Tensor, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], 1.0)
    optimizer.step()
    scheduler.step()


def train_verifier(model: LlamaForCausalLM, data: torch.Tensor, schedule: Schedule, generator: torch.Generator) -> None:
    """Next-token training on the corpus."""
    optimizer, scheduler = _optimizer(list(model.parameters()), schedule)
    model.train()
    for batch in batches(data, schedule, generator):
        _update(model(input_ids=batch, labels=batch).loss, optimizer, scheduler)
    model.eval()


def _kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    teacher = teacher_logits.float().softmax(-1)
    return F.kl_div(student_logits.float().log_softmax(-1), teacher, reduction="batchmean")


def distill_draft(
    draft: LlamaForCausalLM, verifier: LlamaForCausalLM, data: torch.Tensor, schedule: Schedule, generator: torch.Generator
) -> None:
    """Train the draft to match the verifier's next-token distribution (KL)."""
    optimizer, scheduler = _optimizer(list(draft.parameters()), schedule)
    draft.train()
    for batch in batches(data, schedule, generator):
        with torch.no_grad():
            teacher = verifier(input_ids=batch).logits
        student = draft(input_ids=batch).logits
        _update(_kl(student.flatten(0, 1), teacher.flatten(0, 1)), optimizer, scheduler)
    draft.eval()


@dataclass(frozen=True)
class HeadInputs:
    """What an EAGLE-3 head trains on, computed once per batch from the frozen verifier."""

    aux: torch.Tensor  # batch x T x (aux layers · hidden)
    teacher: torch.Tensor  # batch x T x vocab
    embeds: torch.Tensor  # batch x T x hidden


def head_inputs(verifier: LlamaForCausalLM, batch: torch.Tensor, aux_layer_ids: list[int]) -> HeadInputs:
    """Run the verifier and keep the inputs of the aux layers (vLLM's convention), logits and embeddings."""
    with torch.no_grad():
        out = verifier(input_ids=batch, output_hidden_states=True)
        aux = torch.cat([out.hidden_states[i] for i in aux_layer_ids], dim=-1)
        return HeadInputs(aux, out.logits, verifier.get_input_embeddings()(batch))


def head_logits(head: Eagle3Head, verifier: LlamaForCausalLM, normed: torch.Tensor) -> torch.Tensor:
    if head.lm_head is not None:
        return head.lm_head(normed)
    output = verifier.get_output_embeddings()
    assert output is not None
    return output(normed)


def head_forward(
    head: Eagle3Head, verifier: LlamaForCausalLM, inputs: HeadInputs, draft_ids: torch.Tensor | None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return (student logits, teacher logits) per training-time-test step.

    Step i at position t sees the token at t+1+i and predicts the verifier's
    distribution at t+1+i; its hidden input is step i-1's pre-norm output.
    """
    length = inputs.aux.shape[1] - 1 - TTT_STEPS
    positions = torch.arange(length).unsqueeze(0).expand(inputs.aux.shape[0], -1)
    hidden = head.fc(inputs.aux[:, :length])
    cache: list[tuple[torch.Tensor, torch.Tensor]] = []
    pairs = []
    for step in range(TTT_STEPS):
        window = slice(1 + step, 1 + step + length)
        normed, hidden = head.step(inputs.embeds[:, window], hidden, positions + step, cache)
        teacher = inputs.teacher[:, window]
        if draft_ids is not None:
            teacher = teacher[..., draft_ids]
        pairs.append((head_logits(head, verifier, normed), teacher))
    return pairs


def train_head(
    head: Eagle3Head,
    verifier: LlamaForCausalLM,
    data: torch.Tensor,
    schedule: Schedule,
    generator: torch.Generator,
    *,
    aux_layer_ids: list[int],
    draft_ids: torch.Tensor | None = None,
) -> None:
    """KL to the verifier over three training-time-test steps, later steps weighted less."""
    params = [p for name, p in head.named_parameters() if not name.startswith("rotary.")]
    optimizer, scheduler = _optimizer(params, schedule)
    head.train()
    for batch in batches(data, schedule, generator):
        pairs = head_forward(head, verifier, head_inputs(verifier, batch, aux_layer_ids), draft_ids)
        loss = sum(0.8**step * _kl(s.flatten(0, 1), t.flatten(0, 1)) for step, (s, t) in enumerate(pairs))
        _update(torch.as_tensor(loss), optimizer, scheduler)
    head.eval()


def draft_agreement(draft: LlamaForCausalLM, verifier: LlamaForCausalLM, data: torch.Tensor) -> float:
    """Return the teacher-forced rate at which draft and verifier pick the same next token."""
    with torch.no_grad():
        same = draft(input_ids=data).logits.argmax(-1) == verifier(input_ids=data).logits.argmax(-1)
    return round(same.float().mean().item(), 4)


def head_agreement(
    head: Eagle3Head, verifier: LlamaForCausalLM, data: torch.Tensor, aux_layer_ids: list[int], draft_ids: torch.Tensor | None
) -> list[float]:
    """Return the per-step top-1 agreement of the head with the verifier's full-vocab choice."""
    with torch.no_grad():
        pairs = head_forward(head, verifier, head_inputs(verifier, data, aux_layer_ids), None)
    rates = []
    for student, teacher in pairs:
        picked = student.argmax(-1) if draft_ids is None else draft_ids[student.argmax(-1)]
        rates.append(round((picked == teacher.argmax(-1)).float().mean().item(), 4))
    return rates
