"""What the /metrics tests share (docs/metrics.md): the repository's example turns, the token the tests set,
and an exposition read back with prometheus-client's own parser."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "turns"


TOKEN = "metrics-test-token-9Qw3Er5Ty7Ui"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """`{(sample name, sorted labels): value}` of an exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
