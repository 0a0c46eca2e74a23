"""`python -m workers certify ...`: run one certification alone, with no Django and no database.

`python -m workers qualify --engine vllm --hardware cpu --out qualification.json` runs the engine
controls (workers/qualification.py) and prints one line per control: exit 0 when every control the
build supports passes, 4 when one fails.

`python -m workers certify --dry-run --hardware h100` prints the plan and its estimated cost (workers/cost.py).

`python -m workers serve --registry URL --token shr_...` is a self-hosted worker: it certifies its owner's runs
through the registry's worker API and holds no database, broker or signing secret (workers/remote.py).

`python -m workers reproduce certificate.json --out r.json` re-runs a certificate's certification
and compares the figures: exit 0 when they match, 3 when they do not.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import httpx

from kernel import certificates, console, result
from kernel.director import Director, Stage
from kernel.errors import RunError, UserError
from kernel.hub import HubClient
from kernel.qualification import Control, Record
from kernel.qualification import load as load_qualification
from kernel.repos import HubRepo, gate_check
from kernel.settings import export
from kernel.spec import ModelRef, Plan, RunSpec, levels_for, most_pairs_for
from kernel.verdict import rejudge
from workers import answers, cost, remote
from workers.qualification import CONTROLS, MODES, Settings, qualify
from workers.reproduce import Comparison, compare, spec_from_certificate
from workers.stages import default_stages, unserved_stages
from workers.suites import load_suite

VERBOSE = "Show the engines' own logs here; by default they go to a file under var/log/, named on the terminal."


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workers", description="Certify one draft/verifier pair.")
    commands = parser.add_subparsers(dest="command", required=True)
    certify = commands.add_parser("certify", help="Measure acceptance, equivalence and throughput; write the result document.")
    certify.add_argument("--draft", help="Draft repo id (omit for ngram/suffix).")
    certify.add_argument("--verifier", help="Verifier repo id (needed unless --dry-run).")
    certify.add_argument("--draft-revision", default="main")
    certify.add_argument("--verifier-revision", default="main")
    certify.add_argument("--method", help="vLLM method; by default what the draft's config describes.")
    certify.add_argument("--k", type=int, default=4, help="num_speculative_tokens (default 4).")
    certify.add_argument("--engine", default="vllm", help="Engine name (vllm or reference).")
    certify.add_argument("--hardware", default="cpu", help="Hardware class the figures are pinned to.")
    certify.add_argument(
        "--workloads",
        default="toy-v2",
        help="A bundled suite name, or your own traffic: OpenAI chat JSONL, vLLM custom-dataset JSONL, ShareGPT JSON, "
        "a suite JSON or plain text (one prompt per line); chat messages use the verifier's chat template.",
    )
    certify.add_argument("--concurrency", help="Comma-separated concurrency levels (default: the hardware class's, "
                         "1,2,4 on cpu, 1 to 64 on GPUs).")  # fmt: skip
    certify.add_argument("--repeats", type=int, default=4,
                         help="Paired blocks per level before the stopping rule looks (default 4).")  # fmt: skip
    certify.add_argument("--most-pairs", type=int, help="Paired blocks per level at most (default: the hardware class's, "
                         "6 on cpu, 12 on GPUs).")  # fmt: skip
    certify.add_argument("--half-width", type=float, default=0.05,
                         help="The 95 %% interval's relative half-width wanted at the lowest level (default 0.05).")  # fmt: skip
    certify.add_argument("--half-width-loaded", type=float, default=0.10,
                         help="... and at the other levels (default 0.10).")  # fmt: skip
    certify.add_argument("--dry-run", action="store_true",
                         help="Print the plan and its estimated wall time and GPU-minutes; run nothing.")  # fmt: skip
    certify.add_argument("--output-tokens", type=int, default=128, help="Tokens per timed request (default 128).")
    certify.add_argument("--qualification", type=Path,
                         help="An engine qualification record (from `qualify`) to judge the sampling result with.")  # fmt: skip
    certify.add_argument("--out", type=Path, help="Where to write the result JSON (needed unless --dry-run).")
    certify.add_argument("--verbose", action="store_true", help=VERBOSE)
    reproduce = commands.add_parser("reproduce", help="Re-run a certification from its certificate and compare the figures.")
    reproduce.add_argument("certificate", type=Path, help="The certificate file (verify it with manage.py verify_certificate).")
    reproduce.add_argument("--out", type=Path, required=True, help="Where to write the reproduced result JSON.")
    reproduce.add_argument("--verbose", action="store_true", help=VERBOSE)
    reproduce.add_argument("--rtol", type=float, default=0.05, help="Relative tolerance for acceptance figures (default 0.05).")
    reproduce.add_argument(
        "--speedup-rtol", type=float, help="Also judge the speedup at concurrency 1 within this relative tolerance."
    )
    _qualify_arguments(commands.add_parser("qualify", help="Run the engine controls; write the qualification record."))
    _serve_arguments(commands.add_parser("serve", help="A self-hosted worker: certify your runs through the registry's API."))
    return parser.parse_args(argv)


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--registry", required=True, help="The registry's URL, e.g. https://spechub.example.")
    serve.add_argument("--token", help="A registration token from your workers page: registers the machine (once; later "
                       "starts read the credential it kept).")  # fmt: skip
    serve.add_argument("--credential-file", type=Path, default=Path.home() / ".config" / "spechub" / "worker.json",
                       help="Where the worker's credential is kept, readable by you only.")  # fmt: skip
    serve.add_argument("--name", default=platform.node() or "worker", help="The machine's name on your workers page.")
    serve.add_argument("--engine", default="vllm", help="The engine whose build the worker registers.")
    serve.add_argument("--stages", default="workers.stages.default_stages", help="Dotted path of the stage factory.")
    serve.add_argument("--qualifier", default="workers.qualification.qualify_build",
                       help="Dotted path of the engine controls, run before claiming where the registry asks.")  # fmt: skip
    serve.add_argument("--poll", type=float, default=10.0, help="Seconds between claims while no run waits.")
    serve.add_argument("--once", action="store_true",
                       help="Certify one run (or none, if none waits), then exit; 5 when its upload was refused.")  # fmt: skip
    serve.add_argument("--verbose", action="store_true", help=VERBOSE)


def run_serve(args: argparse.Namespace, terminal: console.Terminal) -> int:
    registry = remote.Registry(args.registry)
    try:
        registry.credential = remote.credential(registry, args.credential_file, args.token, args.name, args.engine)
        for hardware in remote.qualify_where_asked(registry, args.engine, args.qualifier):
            terminal.err.write(f"qualified {args.engine} on {hardware} here, and sent the record\n")
        return remote.serve(registry, stages=args.stages, poll_seconds=args.poll, once=args.once, say=terminal.err.write)
    except answers.Refused as refused:  # a Garbled answer too: the field it names, never a traceback
        terminal.err.write(f"serve stopped: {refused}\n")
        return 5
    except httpx.HTTPError as unreachable:
        terminal.err.write(f"serve stopped: the registry at {registry.url} did not answer ({unreachable}).\n")
        return 6


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
    qualify.add_argument("--verbose", action="store_true", help=VERBOSE)


def qualify_settings(args: argparse.Namespace) -> Settings:
    options = dict(option.partition("=")[::2] for option in args.engine_option)
    chosen = {
        name: tuple(getattr(args, name).split(","))
        for name in ("controls", "modes") if getattr(args, name)
    }  # fmt: skip
    return Settings(engine=args.engine, hardware=args.hardware, dtype=args.dtype, tv=args.tv,
                    engine_extra=dict(options), **chosen)  # type: ignore[arg-type]  # fmt: skip


def run_qualify(args: argparse.Namespace, terminal: console.Terminal) -> int:
    export("VLLM_LOGGING_LEVEL", "WARNING", keep_given=True)  # one line per control, not vLLM's every step

    def line(control: Control) -> None:
        terminal.out.write(f"{control['name']:<15} {control['outcome']:<14} {control['summary']}\n")

    record = qualify(qualify_settings(args), line)
    args.out.write_text(json.dumps(record, indent=2))
    failed = [c["name"] for c in record["controls"] if c["outcome"] == "fail"]
    unsure = [c["name"] for c in record["controls"] if c["outcome"] == "inconclusive"]
    said = [f"fails {', '.join(failed)}"] * bool(failed) + [f"{', '.join(unsure)} inconclusive"] * bool(unsure)
    terminal.out.write(f"{record['engine']} {record['engine_build']} on {record['hardware']} ({record['dtype']}): "
                       f"{'; '.join(said) or 'every supported control passes'}; "
                       f"{record['seconds']:.0f} s; digest {record['digest'][:12]} -> {args.out}\n")  # fmt: skip
    return CONTROL_FAILS if failed or unsure else 0


def spec_from(args: argparse.Namespace) -> RunSpec:
    load_suite(args.workloads)  # a bad workload file is refused, naming its line, before anything is downloaded
    client = HubClient.from_settings()
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
    return RunSpec(
        run_id=0, attempt=1, verifier=verifier, draft=draft, method=method, num_speculative_tokens=args.k,
        engine=args.engine, hardware=args.hardware, plan=plan_from(args),
    )  # fmt: skip


def plan_from(args: argparse.Namespace) -> Plan:
    levels = tuple(int(c) for c in args.concurrency.split(",")) if args.concurrency else levels_for(args.hardware)
    most = args.most_pairs or most_pairs_for(args.hardware)
    precision = {"most_pairs": most, "half_width": args.half_width, "half_width_loaded": args.half_width_loaded}
    return Plan(workloads=args.workloads, concurrency=levels, repeats=args.repeats, output_tokens=args.output_tokens, **precision)


def dry_run(args: argparse.Namespace) -> int:
    try:
        print("\n".join(cost.describe(plan_from(args), args.hardware)))
    except ValueError as error:
        sys.stderr.write(f"{error}\n")
        return 1
    return 0


def progress_bar(terminal: console.Terminal) -> tuple[Callable[[str, int], None], Callable[[], None]]:
    """A tqdm bar on the terminal's error stream: the director's (stage, percent) reports move it."""
    from tqdm import tqdm

    bar = tqdm(total=100, file=terminal.err, bar_format="{bar:30} {n:3.0f}% {postfix}", mininterval=0.5)

    def report(stage: str, percent: int) -> None:
        bar.set_postfix_str(stage, refresh=False)
        bar.update(percent - bar.n)

    return report, bar.close


MISMATCH = 3
CONTROL_FAILS = 4


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command == "certify" and args.dry_run:
        return dry_run(args)
    with console.quiet(args.command, verbose=args.verbose) as terminal:
        if terminal.log:
            terminal.err.write(f"The engines' logs go to {terminal.log} (--verbose shows them here).\n")
        try:
            if args.command == "serve":
                return run_serve(args, terminal)
            return run_qualify(args, terminal) if args.command == "qualify" else run_certify(args, terminal)
        except RunError as error:
            terminal.err.write(f"{args.command} failed ({error.code}, {error.fault} fault): {error.message}\n")
            return 1 if error.fault == "user" else 2


def run_certify(args: argparse.Namespace, terminal: console.Terminal) -> int:
    """Certify (or reproduce a certificate's certification), write the document, print the verdict."""
    if args.command == "certify" and (args.out is None or args.verifier is None):
        raise UserError("run:invalid-spec", "--verifier and --out are needed: the verifier's repo id, and where to "
                        "write the result document.")  # fmt: skip
    payload = _certificate(args.certificate) if args.command == "reproduce" else None
    spec = spec_from_certificate(payload) if payload else spec_from(args)
    stages = _stages(args, payload, terminal.err)
    report, done = progress_bar(terminal)
    try:
        document = Director(stages).run(spec, report)
    finally:
        done()
    if getattr(args, "qualification", None):
        document = rejudge(document, _qualification(args.qualification))
    args.out.write_text(json.dumps(document, indent=2))
    verdict = result.verdict(document)
    judged = f"{verdict['verdict']}: {'; '.join(verdict['reasons']) or 'every threshold met'}" if verdict else "no verdict"
    terminal.out.write(f"{judged} -> {args.out}\n")
    if payload is None:
        return 0
    return _report(compare(payload["results"], document, rtol=args.rtol, speedup_rtol=args.speedup_rtol), terminal.out)


def _stages(args: argparse.Namespace, payload: certificates.Payload | None, err: TextIO) -> list[Stage]:
    """Every stage, except for a reproduction that judges no speed: it compares acceptance and greedy output only,
    so it starts no server (minutes less); `--speedup-rtol` measures and judges speed too."""
    if payload is None or args.speedup_rtol is not None:
        return default_stages()
    err.write("Speed is judged only with --speedup-rtol; without it no server is started (throughput, smoke).\n")
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


def _report(comparisons: list[Comparison], out: TextIO) -> int:
    for row in comparisons:
        judged = "reported" if row.tolerance is None else ("ok" if row.matches else "DIFFERS")
        out.write(f"  {row.figure:<45} certified {row.certified!s:<22} reproduced {row.reproduced!s:<22} {judged}\n")
    differing = [row.figure for row in comparisons if not row.matches]
    out.write("reproduced: every judged figure matches\n" if not differing else f"NOT reproduced: {', '.join(differing)}\n")
    return MISMATCH if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
