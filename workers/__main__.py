"""`python -m workers certify ...`: run one certification alone, with no Django and no database.

`python -m workers qualify --engine vllm --hardware cpu --out qualification.json` runs the engine
controls (workers/qualification.py) and prints one line per control: exit 0 when every control the
build supports passes, 4 when one fails.

`python -m workers reproduce certificate.json --out r.json` re-runs a certificate's certification
and compares the figures: exit 0 when they match, 3 when they do not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kernel import certificates, result
from kernel.director import Director, Stage
from kernel.errors import RunError, UserError
from kernel.hub import HubClient
from kernel.qualification import Control, Record
from kernel.qualification import load as load_qualification
from kernel.repos import HubRepo, gate_check
from kernel.spec import ModelRef, Plan, RunSpec
from kernel.verdict import rejudge
from workers.qualification import CONTROLS, MODES, Settings, qualify
from workers.reproduce import Comparison, compare, spec_from_certificate
from workers.stages import default_stages, unserved_stages
from workers.workloads import load_suite


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workers", description="Certify one draft/verifier pair.")
    commands = parser.add_subparsers(dest="command", required=True)
    certify = commands.add_parser("certify", help="Measure acceptance, equivalence and throughput; write the result document.")
    certify.add_argument("--draft", help="Draft repo id (omit for ngram/suffix).")
    certify.add_argument("--verifier", required=True, help="Verifier repo id.")
    certify.add_argument("--draft-revision", default="main")
    certify.add_argument("--verifier-revision", default="main")
    certify.add_argument("--method", help="vLLM method; by default what the draft's config describes.")
    certify.add_argument("--k", type=int, default=4, help="num_speculative_tokens (default 4).")
    certify.add_argument("--engine", default="vllm", help="Engine name (vllm or reference).")
    certify.add_argument("--hardware", default="cpu", help="Hardware class the figures are pinned to.")
    certify.add_argument(
        "--workloads",
        default="toy-v1",
        help="A bundled suite name, or your own traffic: OpenAI chat JSONL, vLLM custom-dataset JSONL, ShareGPT JSON, "
        "a suite JSON or plain text (one prompt per line); chat messages use the verifier's chat template.",
    )
    certify.add_argument("--concurrency", default="1,2,4,8,16", help="Comma-separated concurrency levels.")
    certify.add_argument("--repeats", type=int, default=5, help="Paired A B B A blocks per level (default 5).")
    certify.add_argument("--output-tokens", type=int, default=128, help="Tokens per timed request (default 128).")
    certify.add_argument("--qualification", type=Path,
                         help="An engine qualification record (from `qualify`) to judge the sampling result with.")  # fmt: skip
    certify.add_argument("--out", type=Path, required=True, help="Where to write the result JSON.")
    reproduce = commands.add_parser("reproduce", help="Re-run a certification from its certificate and compare the figures.")
    reproduce.add_argument("certificate", type=Path, help="The certificate file (verify it with manage.py verify_certificate).")
    reproduce.add_argument("--out", type=Path, required=True, help="Where to write the reproduced result JSON.")
    reproduce.add_argument("--rtol", type=float, default=0.05, help="Relative tolerance for acceptance figures (default 0.05).")
    reproduce.add_argument(
        "--speedup-rtol", type=float, help="Also judge the speedup at concurrency 1 within this relative tolerance."
    )
    _qualify_arguments(commands.add_parser("qualify", help="Run the engine controls; write the qualification record."))
    return parser.parse_args(argv)


def _qualify_arguments(qualify: argparse.ArgumentParser) -> None:
    qualify.add_argument("--engine", default="vllm", help="Engine name (vllm or reference).")
    qualify.add_argument("--hardware", default="cpu", help="Hardware class the record is pinned to.")
    qualify.add_argument("--dtype", default="float32")
    qualify.add_argument("--tv", type=float, default=0.1, help="Total variation each sampling test detects (default 0.1).")
    qualify.add_argument("--controls", help=f"Comma-separated subset of {', '.join(c.name for c in CONTROLS)}.")
    qualify.add_argument("--modes", help=f"Comma-separated subset of {', '.join(MODES)}.")
    qualify.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                         help="An engine argument: accept_rule=always is the reference engine's wrong sampler.")  # fmt: skip
    qualify.add_argument("--out", type=Path, required=True, help="Where to write the qualification JSON.")


def qualify_settings(args: argparse.Namespace) -> Settings:
    options = dict(option.partition("=")[::2] for option in args.engine_option)
    chosen = {
        name: tuple(getattr(args, name).split(","))
        for name in ("controls", "modes") if getattr(args, name)
    }  # fmt: skip
    return Settings(engine=args.engine, hardware=args.hardware, dtype=args.dtype, tv=args.tv,
                    engine_extra=dict(options), **chosen)  # type: ignore[arg-type]  # fmt: skip


def run_qualify(args: argparse.Namespace) -> int:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # one line per control, not vLLM's every step

    def line(control: Control) -> None:
        print(f"{control['name']:<15} {control['outcome']:<14} {control['summary']}", flush=True)

    record = qualify(qualify_settings(args), line)
    args.out.write_text(json.dumps(record, indent=2))
    failed = [c["name"] for c in record["controls"] if c["outcome"] == "fail"]
    unsure = [c["name"] for c in record["controls"] if c["outcome"] == "inconclusive"]
    said = [f"fails {', '.join(failed)}"] * bool(failed) + [f"{', '.join(unsure)} inconclusive"] * bool(unsure)
    print(f"{record['engine']} {record['engine_build']} on {record['hardware']} ({record['dtype']}): "
          f"{'; '.join(said) or 'every supported control passes'}; "
          f"{record['seconds']:.0f} s; digest {record['digest'][:12]} -> {args.out}")  # fmt: skip
    return CONTROL_FAILS if failed or unsure else 0


def spec_from(args: argparse.Namespace) -> RunSpec:
    load_suite(args.workloads)  # a bad workload file is refused, naming its line, before anything is downloaded
    client = HubClient.from_environment()
    verifier = ModelRef(args.verifier, client.resolve(args.verifier, args.verifier_revision))
    draft = ModelRef(args.draft, client.resolve(args.draft, args.draft_revision)) if args.draft else None
    method = args.method
    if method is None:  # what the gate derives from the draft's config
        judged = gate_check(
            verifier=HubRepo(client, verifier.repo_id, verifier.sha),
            verifier_id=verifier.repo_id,
            draft=HubRepo(client, draft.repo_id, draft.sha) if draft else None,
        )
        method = judged.method or "draft_model"
    levels = tuple(int(c) for c in args.concurrency.split(","))
    plan = Plan(workloads=args.workloads, concurrency=levels, repeats=args.repeats, output_tokens=args.output_tokens)
    return RunSpec(
        run_id=0, attempt=1, verifier=verifier, draft=draft, method=method, num_speculative_tokens=args.k,
        engine=args.engine, hardware=args.hardware, plan=plan,
    )  # fmt: skip


def progress(stage: str, percent: int) -> None:
    filled = percent * 30 // 100
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {percent:3d}% {stage:<12}")
    sys.stderr.flush()


MISMATCH = 3
CONTROL_FAILS = 4


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "qualify":
            return run_qualify(args)
        payload = _certificate(args.certificate) if args.command == "reproduce" else None
        spec = spec_from_certificate(payload) if payload else spec_from(args)
        document = Director(_stages(args, payload)).run(spec, progress)
        if getattr(args, "qualification", None):
            document = rejudge(document, _qualification(args.qualification))
    except RunError as error:
        sys.stderr.write(f"\n{args.command} failed ({error.code}, {error.fault} fault): {error.message}\n")
        return 1 if error.fault == "user" else 2
    sys.stderr.write("\n")
    args.out.write_text(json.dumps(document, indent=2))
    verdict = result.verdict(document)
    judged = f"{verdict['verdict']}: {'; '.join(verdict['reasons']) or 'every threshold met'}" if verdict else "no verdict"
    print(f"{judged} -> {args.out}")
    return _report(compare(payload["results"], document, rtol=args.rtol, speedup_rtol=args.speedup_rtol)) if payload else 0


def _stages(args: argparse.Namespace, payload: certificates.Payload | None) -> list[Stage]:
    """Every stage, except for a reproduction that judges no speed: it compares acceptance and greedy output only,
    so it starts no server (minutes less); `--speedup-rtol` measures and judges speed too."""
    if payload is None or args.speedup_rtol is not None:
        return default_stages()
    sys.stderr.write("Speed is judged only with --speedup-rtol; without it no server is started (throughput, smoke).\n")
    return unserved_stages()


def _qualification(path: Path) -> Record:
    try:
        return load_qualification(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:  # UnreadableQualification is a ValueError
        raise UserError("run:invalid-spec", f"{path} is not a qualification record SpecHub reads ({exc}).") from None


def _certificate(path: Path) -> certificates.Payload:
    try:
        payload = certificates.payload_of(path.read_bytes())
        payload["inputs"]  # a payload without inputs is not a certificate to reproduce
    except (OSError, KeyError, TypeError, certificates.CertificateInvalid) as exc:
        raise UserError("run:invalid-spec", f"{path} is not a SpecHub certificate file ({exc}).") from None
    return payload


def _report(comparisons: list[Comparison]) -> int:
    for row in comparisons:
        judged = "reported" if row.tolerance is None else ("ok" if row.matches else "DIFFERS")
        print(f"  {row.figure:<45} certified {row.certified!s:<22} reproduced {row.reproduced!s:<22} {judged}")
    differing = [row.figure for row in comparisons if not row.matches]
    print("reproduced: every judged figure matches" if not differing else f"NOT reproduced: {', '.join(differing)}")
    return MISMATCH if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
