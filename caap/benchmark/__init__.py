"""The TANGLE benchmark harness (DESIGN §7).

>>> from caap.benchmark import run
>>> report = run(track="oracle", policy="recency", out="runs/recency")  # doctest: +SKIP
>>> report.mean_total("BOC")  # doctest: +SKIP

Command line: ``caap tangle run|compare|validate|ablation|list`` (see ``docs/benchmark.md``).
"""

from caap.benchmark.base import Judge, JudgeInput, Scores
from caap.benchmark.dataset import (
    DatasetError,
    Instance,
    InstanceMemory,
    Persona,
    Session,
    Turn,
    default_dataset_path,
    iter_dataset,
    load_dataset,
)
from caap.benchmark.observability import (
    PROVENANCE_FLOOR,
    SEMANTIC_THRESHOLD,
    Match,
    Observability,
    level_for,
    match_bank,
    observe,
)
from caap.benchmark.presentation import Presented, present
from caap.benchmark.registry import (
    ComponentSpec,
    get_judge,
    get_policy,
    judge,
    judges,
    policies,
    policy,
    spec_of,
)
from caap.benchmark.report import (
    SCHEMA_VERSION,
    InstanceResult,
    ObservabilityResult,
    Report,
    ScoreRow,
    read_report,
    write_report,
)
from caap.benchmark.runner import (
    AblationRow,
    PairedSummary,
    format_summary,
    paired_summary,
    run,
    run_noise_ablation,
    write_outputs,
)
from caap.benchmark.tracks import PipelineBank, run_oracle_instance, run_pipeline_instance
from caap.benchmark.validate import Problem, validate_dataset, validate_instances

__all__ = [
    "PROVENANCE_FLOOR",
    "SCHEMA_VERSION",
    "SEMANTIC_THRESHOLD",
    "AblationRow",
    "ComponentSpec",
    "DatasetError",
    "Instance",
    "InstanceMemory",
    "InstanceResult",
    "Judge",
    "JudgeInput",
    "Match",
    "Observability",
    "ObservabilityResult",
    "PairedSummary",
    "Persona",
    "PipelineBank",
    "Presented",
    "Problem",
    "Report",
    "ScoreRow",
    "Scores",
    "Session",
    "Turn",
    "default_dataset_path",
    "format_summary",
    "get_judge",
    "get_policy",
    "iter_dataset",
    "judge",
    "judges",
    "level_for",
    "load_dataset",
    "match_bank",
    "observe",
    "paired_summary",
    "policies",
    "policy",
    "present",
    "read_report",
    "run",
    "run_noise_ablation",
    "run_oracle_instance",
    "run_pipeline_instance",
    "spec_of",
    "validate_dataset",
    "validate_instances",
    "write_outputs",
    "write_report",
]
