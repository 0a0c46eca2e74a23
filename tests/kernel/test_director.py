from __future__ import annotations

import pytest

from kernel.director import STAGE_ORDER, Director, load_stages
from kernel.errors import InfraError, UserError
from kernel.spec import ModelRef, RunSpec
from tests.support.stages import InjectedStage, injected_quick_stages


def spec() -> RunSpec:
    return RunSpec(
        run_id=1,
        attempt=1,
        verifier=ModelRef("toy/verifier", "a" * 40),
        draft=ModelRef("toy/draft", "b" * 40),
        method="draft_model",
        num_speculative_tokens=4,
        engine="vllm",
        hardware="cpu",
    )


def test_it_runs_injected_stages_in_order_and_collects_their_results():
    seen: list[tuple[str, int]] = []
    document = Director(injected_quick_stages()).run(spec(), lambda stage, pct: seen.append((stage, pct)))
    assert list(document["stages"]) == ["fetch", "gate", "baseline", "verdict"]
    assert document["workloads"]["chat"]["acceptance"]["mean_acceptance_length"] == 3.5
    assert document["spec"]["draft"] == {"repo_id": "toy/draft", "sha": "b" * 40}
    percents = [pct for _, pct in seen]
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100


def test_a_stage_sees_the_results_of_the_stages_before_it():
    seen = {}

    def look(spec, report):
        return {}

    class Peek(InjectedStage):
        def run(self, spec, document, report):
            seen.update(document["stages"])
            return {}

    Director([*injected_quick_stages()[:2], Peek("baseline", look)]).run(spec(), lambda *_: None)
    assert set(seen) == {"fetch", "gate"}


def test_a_director_without_stages_refuses_to_run():
    with pytest.raises(InfraError) as error:
        Director([])
    assert error.value.code == "director:no-stages" and not error.value.retryable


def test_the_default_worker_build_has_the_measuring_stages_in_order():
    assert [stage.name for stage in load_stages("workers.stages.default_stages")] == list(STAGE_ORDER)


@pytest.mark.parametrize("path", ["nowhere.stages", "workers.stages.missing", "kernel.director.STAGE_ORDER", "plain"])
def test_a_bad_stage_path_is_an_infra_error_naming_it(path):
    with pytest.raises(InfraError, match=path.replace(".", r"\.")) as error:
        load_stages(path)
    assert error.value.code == "director:bad-stages"


def test_errors_refuse_a_code_raised_as_the_wrong_fault():
    with pytest.raises(ValueError, match="user error"):
        InfraError("run:invalid-spec")
    with pytest.raises(ValueError, match="infrastructure error"):
        UserError("worker:lost")
    with pytest.raises(KeyError, match="unknown error code"):
        InfraError("no:such-code")


class Closing:
    """A stage that records its close: the director calls it once the run ends, whatever the outcome."""

    def __init__(self, name: str, fails: bool = False) -> None:
        self.name, self.fails, self.closed = name, fails, 0

    def run(self, spec, document, report):
        if self.fails:
            raise UserError("engine:refused-pair", "refused")
        return {}

    def close(self) -> None:
        self.closed += 1


def test_the_director_closes_every_stage_once_the_run_ends_whatever_its_outcome():
    done = [Closing("fetch"), Closing("verdict")]
    Director(done).run(spec(), lambda stage, pct: None)
    failing = [Closing("fetch", fails=True), Closing("verdict")]
    with pytest.raises(UserError):
        Director(failing).run(spec(), lambda stage, pct: None)
    assert [s.closed for s in done + failing] == [1, 1, 1, 1]  # the stage that never ran is closed too
