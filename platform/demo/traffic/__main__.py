"""python -m demo.traffic --url URL --org NAME=PERSONA=API_KEY [--org ...] [options]:
drive simulated organizations against a running platform and print what each one saw.

Delayed feedback is waited for by default; Ctrl-C while waiting sends what is left at once.
"""

import argparse
import math
from dataclasses import astuple
from urllib.parse import urlsplit

from demo.personas import Persona, load_personas
from demo.traffic.driver import SimulatedOrg, run_traffic
from demo.traffic.stats import format_summary


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.wait:
        print(f"Delayed feedback comes up to {_longest_wait_s(args):.0f} s after its response; --no-wait sends it at once.\n")
    try:
        traffic = run_traffic(
            url=args.url, orgs=args.orgs, requests=args.requests, concurrency=args.concurrency, seed=args.seed,
            time_scale=args.time_scale, task_share=args.task_share, wait=args.wait,
        )
    except KeyboardInterrupt:
        raise SystemExit("Interrupted: the feedback gathered so far was sent, the rest of the run dropped.") from None
    print("\n\n".join(format_summary(figures) for figures in traffic.values()))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m demo.traffic", description="Drive simulated organizations against the platform's public API.",
    )
    parser.add_argument("--url", type=_url, default="http://127.0.0.1:8000", help="the platform (default: %(default)s)")
    parser.add_argument(
        "--org", dest="orgs", type=_org, action="append", required=True, metavar="NAME=PERSONA=API_KEY",
        help=f"an organization, its persona ({', '.join(load_personas())}) and its API key; repeat for more",
    )
    parser.add_argument("--requests", type=_at_least_one, default=200, help="gateway calls per organization (default: %(default)s)")
    parser.add_argument("--concurrency", type=_at_least_one, default=4, help="calls in flight per organization (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="replays prompts, users and their reactions (default: %(default)s)")
    parser.add_argument(
        "--time-scale", type=_time_scale, default=0.001,
        help="real seconds per simulated second of feedback delay; 1 is real time (default: %(default)s)",
    )
    parser.add_argument("--task-share", type=_share, default=0.1, help="share of calls in background tasks (default: %(default)s)")
    parser.add_argument("--no-wait", dest="wait", action="store_false", help="send delayed feedback at once at the end")
    args = parser.parse_args(argv)
    names = [org.name for org in args.orgs]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        parser.error(f"argument --org: {', '.join(twice)} given more than once")
    return args


def _org(text: str) -> SimulatedOrg:
    # The text is never echoed back: it may hold a key.
    parts = [part.strip() for part in text.split("=", 2)]  # any '=' after the second is the key's
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("expected NAME=PERSONA=API_KEY, with two '=' signs")
    if empty := [what for what, part in zip(("NAME", "PERSONA", "API_KEY"), parts) if not part]:
        raise argparse.ArgumentTypeError(f"empty {' and '.join(empty)} in NAME=PERSONA=API_KEY")
    name, persona, api_key = parts
    try:
        return SimulatedOrg(name, Persona.load(persona), api_key)
    except KeyError as error:
        raise argparse.ArgumentTypeError(error.args[0]) from None


def _url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"expected an http(s) URL such as http://127.0.0.1:8000, got {text!r}")
    return text.rstrip("/")


def _at_least_one(text: str) -> int:
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _time_scale(text: str) -> float:
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, not {text}")
    return value


def _share(text: str) -> float:
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must lie between 0 and 1, not {text}")
    return value


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None


def _longest_wait_s(args: argparse.Namespace) -> float:
    return max(high for org in args.orgs for _, high in astuple(org.persona.delays)) * args.time_scale


if __name__ == "__main__":
    main()
