"""Every user-facing string that says "pass", "faster", "within" or "exactly" is listed here with the function that
earns it (issue 39): a new one fails this test until someone has checked that its test supports the word.

Python string literals (not docstrings) in registry/, kernel/, spechub/ and workers/, and template lines, are read.
The behaviour behind each label has its own test; this one keeps the list of places honest.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = re.compile(r"\b(faster|pass|passes|within|exactly)\b", re.IGNORECASE)

# (module, function) -> what earns the word there.
PYTHON = {
    ("kernel/certificates.py", "_parse"): "'exactly as issued': canonical bytes, checked by verify()",
    ("kernel/certificates.py", "_verify_dsse"): "'exactly as issued': canonical bytes, checked by verify()",
    ("kernel/formats/findings.py", "<module>"): "a gate finding's text: exactly draft_vocab_size entries, a rule checks it",
    ("kernel/formats/rules.py", "_aux_layers"): "'within' the verifier's layers: a range check",
    ("kernel/live.py", "<module>"): "WITHIN: live.judge, from the family-level bound against the band",
    ("kernel/qualification.py", "<module>"): "PASS: a control's outcome, from workers/qualification.py's rejection and power",
    ("kernel/result/__init__.py", "<module>"): "the FASTER name exported",
    ("kernel/result/schema.py", "<module>"): "FASTER and BELOW_MARGIN: result.speed_label, against the practical margin",
    ("kernel/traffic/formats.py", "_bounded_lines"): "an upload's line 'passes' a size check",
    ("kernel/verdict.py", "<module>"): "GOOD: the outcomes a verdict reads as good",
    ("workers/served_schedule.py", "judged"): "'faster than the fixed k': its interval wholly above the fixed k's, tested",
    ("kernel/verdict.py", "_consistent"): "sampling pass: no rejection, with power over the bins used (dof >= 1)",
    ("kernel/verdict.py", "greedy"): "greedy pass: every prompt's output equal",
    ("kernel/verdict.py", "sampling"): "sampling pass only through _consistent",
    ("registry/runs/api.py", "ControlOut"): "help text listing a control's outcomes",
    ("registry/api/serializers.py", "PropertyOut"): "help text listing the property outcomes",
    ("registry/api/serializers.py", "SpeedOut"): "help text: what speed_label may say",
    ("registry/notifications/payloads.py", "DriftData"): "schema help: the live verdicts",
    ("registry/fleet/api.py", "QualifiedOut"): "schema help: EngineQualification.passed, the record's own outcomes",
    ("registry/fleet/api.py", "TokenOut"): "schema help: 'within the hour', the token's expiry (worker_register checks it)",
    ("registry/fleet/services.py", "worker_qualify"): "'passes': EngineQualification.passed, the record's own outcomes",
    ("registry/management/commands/demo.py", "_qualify"): "'every control passes': Qualification.passed",
    ("registry/management/commands/gate.py", "_verifier"): "pass a folder or a repo id (an argument)",
    ("registry/management/commands/qualification_load.py", "handle"): "'every control passes': the record's own outcomes",
    ("registry/management/commands/verify_certificate.py", "add_arguments"): "help: the file exactly as issued",
    ("registry/runs/models.py", "__str__"): "'every control passes': Qualification.passed",
    ("registry/notifications/outbound.py", "post"): "'within' a timeout",
    ("registry/runs/selectors.py", "<module>"): "TONES: the colour of an outcome already earned",
    ("registry/traffic/report.py", "outputs"): "reads the property rows' outcomes (pass), never decides them",
    ("registry/traffic/report.py", "recommend"): "'faster': result.speed_label against the candidate's margin",
    ("registry/traffic/services.py", "workload_certify"): "pass pair ids (an instruction)",
    ("spechub/client.py", "plain_http_check"): "pass --allow-http (an instruction)",
    ("spechub/client.py", "_whole"): "pass --max-answer-mb (an instruction)",
    ("kernel/typed.py", "_number"): "'within ±2**53': a range check on an incoming number",
    ("workers/__main__.py", "parse"): "help: within a stated precision",
    ("workers/__main__.py", "run_qualify"): "'every control passes': the qualification record",
    ("registry/catalog/formats.py", "_loads"): "'control passes': the build's qualification record's own outcome (q.PASS)",
    ("spechub/cli.py", "judge"): "'within': kernel.judging.judge's verdict, the run's interval against the band, tested",
}

# (template, a snippet of the line) -> what earns the word there.
TEMPLATES = {
    ("registry/deployment.html", "No band: re-certify"): "prose: why a point is no band (live.NO_BAND)",
    ("registry/deployment.html", "Each window is the difference"): "prose: what within and below mean (live.judge)",
    ("registry/deployments.html", "A certificate says what a pair did"): "prose: the live verdicts",
    ("registry/engines.html", "every control passes"): "Qualification.passed",
    ("registry/engines.html", "control.outcome == 'pass'"): "a control's own outcome",
    ("registry/imports.html", "a pair that passes is listed"): "the gate's verdict",
    ("registry/workers.html", "q.passed"): "EngineQualification.passed, the record's own outcomes",
    ("registry/pair.html", "must sample exactly as the verifier"): "prose: what the self-draft control requires",
    ("registry/pair.html", "measurably faster up to"): "break_even_bounds: speed_label's margin, in sequence",
    ("registry/pair.html", 'sampling_judged.outcome != "pass"'): "the run's own sampling verdict, shown where it did not pass",
    ("registry/pair.html", "faster is tested in a fixed sequence"): "prose: the fixed sequence, and the halves for slower",
    ("registry/pair.html", "within 25 % (plus 5 ms"): "engine_latency.agrees, held by tests/workers/test_engine_latency.py",
    ("registry/workload.html", "faster up to c="): "break_even_bounds: speed_label's margin, in sequence",
    ("registry/judge.html", "holds its acceptance length"): "prose: what within, below and above mean (kernel.judging.judge)",
}


def python_places() -> set[tuple[str, str]]:
    found = set()
    for root in ("registry", "kernel", "spechub", "workers"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "migrations" not in path.parts:
                found |= {(str(path.relative_to(ROOT)), where) for where in _places(ast.parse(path.read_text()))}
    return found


def _places(tree: ast.Module) -> set[str]:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and WORDS.search(node.value):
            if isinstance(parents.get(node), ast.Expr):
                continue  # a docstring: for the reader of the code, not the user
            found.add(_enclosing(node, parents))
    return found


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return node.name
    return "<module>"


def test_every_python_string_that_says_pass_faster_within_or_exactly_is_listed_with_what_earns_it():
    found = python_places()
    assert found - set(PYTHON) == set(), "new places: check the word is earned, then list them here"
    assert set(PYTHON) - found == set(), "listed places that no longer say it: remove them"


def test_every_template_line_that_says_it_is_listed_with_what_earns_it():
    unlisted, seen = [], set()
    for path in sorted((ROOT / "templates").rglob("*.html")):
        name = str(path.relative_to(ROOT / "templates"))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not WORDS.search(line):
                continue
            listed = [key for key in TEMPLATES if key[0] == name and key[1] in line]
            seen.update(listed)
            if not listed:
                unlisted.append(f"{name}:{number}")
    assert unlisted == [], "new lines: check the word is earned, then list them here"
    assert set(TEMPLATES) - seen == set(), "listed lines that no longer say it: remove them"
