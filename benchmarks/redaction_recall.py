"""Measure ``tenants.redaction.redact`` on the planted corpus.

    .venv/bin/python benchmarks/redaction_recall.py            # table
    .venv/bin/python benchmarks/redaction_recall.py --json     # one JSON object
    .venv/bin/python benchmarks/redaction_recall.py --misses   # also list misses and false positives
    .venv/bin/python benchmarks/redaction_recall.py --entropy  # also measure detect-secrets' entropy plugins

Recall: share of planted items whose span is fully covered by one finding.
Precision: share of findings that overlap a planted item.
Throughput: MB per CPU-second of ``redact`` on ~1 MB of corpus text in one call,
and over the corpus samples one call each (the shape of chat messages). CPU
time, not wall time, so that other load on the machine does not skew it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.redaction_corpus import Planted, Sample, planted_corpus  # noqa: E402
from tenants.redaction import Finding, redact  # noqa: E402


@dataclass
class Report:
    samples: int = 0
    negatives: int = 0
    planted: int = 0
    covered: int = 0
    findings: int = 0
    true_findings: int = 0
    kind_matches: int = 0
    per_kind_planted: Counter[str] = field(default_factory=Counter)
    per_kind_covered: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.covered / self.planted if self.planted else 1.0

    @property
    def precision(self) -> float:
        return self.true_findings / self.findings if self.findings else 1.0

    def per_kind_recall(self) -> dict[str, float]:
        return {k: self.per_kind_covered[k] / n for k, n in sorted(self.per_kind_planted.items())}


def evaluate(samples: list[Sample]) -> Report:
    report = Report(samples=len(samples), negatives=sum(s.is_negative for s in samples))
    for sample in samples:
        findings = redact(sample.text).findings
        _score_planted(report, sample, findings)
        _score_findings(report, sample, findings)
    return report


def _score_planted(report: Report, sample: Sample, findings: tuple[Finding, ...]) -> None:
    for item in sample.planted:
        report.planted += 1
        report.per_kind_planted[item.kind] += 1
        cover = next((f for f in findings if f.start <= item.start and item.end <= f.end), None)
        if cover is None:
            report.misses.append(f"{sample.label}: {sample.text[item.start:item.end]!r}")
            continue
        report.covered += 1
        report.per_kind_covered[item.kind] += 1
        report.kind_matches += cover.kind == item.kind


def _score_findings(report: Report, sample: Sample, findings: tuple[Finding, ...]) -> None:
    for finding in findings:
        report.findings += 1
        if any(_overlaps(finding, item) for item in sample.planted):
            report.true_findings += 1
        else:
            report.false_positives.append(
                f"{sample.label}: {finding.kind} {sample.text[finding.start:finding.end]!r}"
            )


def _overlaps(finding: Finding, item: Planted) -> bool:
    return finding.start < item.end and item.start < finding.end


def throughput(samples: list[Sample], target_bytes: int = 1_000_000) -> dict[str, float]:
    """MB/s for one ~1 MB text, and for the samples redacted one by one."""
    texts = [s.text for s in samples]
    blob_parts: list[str] = []
    size = 0
    while size < target_bytes:
        for text in texts:
            blob_parts.append(text)
            size += len(text.encode()) + 1
            if size >= target_bytes:
                break
    blob = "\n".join(blob_parts)
    mb = len(blob.encode()) / 1e6
    start = time.process_time()
    redact(blob)
    one_call = mb / (time.process_time() - start)

    per_sample_mb = sum(len(t.encode()) for t in texts) / 1e6
    start = time.process_time()
    for text in texts:
        redact(text)
    per_message = per_sample_mb / (time.process_time() - start)
    return {"mb": round(mb, 3), "mb_per_s_one_text": round(one_call, 2), "mb_per_s_per_sample": round(per_message, 2)}


def entropy_experiment(samples: list[Sample]) -> dict[str, float]:
    """How detect-secrets' high-entropy plugins (default limits) would fare here, line by line."""
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

    plugins = (Base64HighEntropyString(), HexHighEntropyString())

    def flags(text: str) -> bool:
        return any(
            plugin.calculate_shannon_entropy(value) > plugin.entropy_limit
            for plugin in plugins
            for line in text.splitlines()
            for value in plugin.analyze_string(line)
        )

    negatives = [s for s in samples if s.is_negative]
    positives = [s for s in samples if not s.is_negative]
    return {
        "negatives_flagged": round(sum(map(flags, (s.text for s in negatives))) / len(negatives), 3),
        "positives_flagged": round(sum(map(flags, (s.text for s in positives))) / len(positives), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--misses", action="store_true", help="list misses and false positives")
    parser.add_argument("--entropy", action="store_true", help="measure detect-secrets' entropy plugins")
    args = parser.parse_args(argv)

    samples = planted_corpus(args.seed)
    report = evaluate(samples)
    figures: dict[str, object] = {
        "seed": args.seed,
        "samples": report.samples,
        "hard_negatives": report.negatives,
        "planted_items": report.planted,
        "recall": round(report.recall, 4),
        "precision": round(report.precision, 4),
        "findings": report.findings,
        "false_positives": report.findings - report.true_findings,
        "kind_agreement": round(report.kind_matches / max(report.covered, 1), 4),
        "per_kind_recall": {k: round(v, 4) for k, v in report.per_kind_recall().items()},
        "throughput": throughput(samples),
    }
    if args.entropy:
        figures["entropy_plugins"] = entropy_experiment(samples)

    if args.json:
        print(json.dumps(figures))
    else:
        _print_table(figures, report)
    if args.misses:
        print("\nmisses:", *report.misses, sep="\n  ")
        print("\nfalse positives:", *report.false_positives, sep="\n  ")
    return 0


def _print_table(figures: dict[str, object], report: Report) -> None:
    print(f"samples          {report.samples} ({report.negatives} hard negatives)")
    print(f"planted items    {report.planted}")
    print(f"recall           {report.recall:.3f}")
    print(f"precision        {report.precision:.3f}  ({report.findings} findings, "
          f"{report.findings - report.true_findings} false positives)")
    print(f"kind agreement   {figures['kind_agreement']:.3f}")
    print("\nkind              planted  recall")
    for kind, value in report.per_kind_recall().items():
        print(f"  {kind:<16}{report.per_kind_planted[kind]:>7}  {value:.3f}")
    tp = figures["throughput"]
    assert isinstance(tp, dict)
    print(f"\nthroughput       {tp['mb_per_s_one_text']} MB per CPU-second on one {tp['mb']} MB text, "
          f"{tp['mb_per_s_per_sample']} one sample per call")
    if "entropy_plugins" in figures:
        print(f"entropy plugins  {figures['entropy_plugins']}")


if __name__ == "__main__":
    raise SystemExit(main())
