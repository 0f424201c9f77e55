"""Evaluation of source-reliability fusion on multi-source atom files (``caap reliability``).

Input: a JSON Lines file, one persona a line (``persona``, ``split``, ``atoms``: question ->
source -> value or null, ``truth``: question -> value, optional ``difficulty`` used for
reporting only), and a questions file (``sources``, ``questions`` with ``id``,
``answer_space``, ``ordered_labels``, ``edge_options``, ``reasoning_type``, ``topic``).
Protocol: fit on the fit splits, calibrate on the calibration splits, score the test splits.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caap._argtypes import fraction, non_negative
from caap.conflict_graph.reliability import AnswerSpace, LabelledCase, ReliabilityModel

SCHEMA = "caap.reliability.eval/1"


@dataclass(frozen=True)
class Persona:
    """One line of an atoms file."""

    persona: str
    split: str
    seed: str | None
    difficulty: str | None
    atoms: dict[str, dict[str, str | None]]
    truth: dict[str, str]


_SHIPPED = Path(__file__).resolve().parent.parent / "data" / "msmb"
SHIPPED_ATOMS = _SHIPPED / "msmb_mu_star_s20260321.jsonl.gz"
"""The multi-source seed shipped with the package (CC BY 4.0; see ``caap/data/msmb/README.md``)."""
SHIPPED_QUESTIONS = _SHIPPED / "msmb_questions.json"
"""The 18 questions of the shipped seed."""


def load_questions(path: str | Path) -> tuple[list[str], list[AnswerSpace]]:
    """Read a questions file: ``(sources, answer spaces)``. Errors name the field."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"questions file not found: {str(p)!r}")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("questions"), list):
        raise ValueError(f"{p}: expected an object with a 'questions' list")
    sources = raw.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ValueError(f"{p}: 'sources' must be a list of strings")
    spaces = []
    for n, q in enumerate(raw["questions"]):
        if not isinstance(q, dict):
            raise ValueError(f"{p}: questions[{n}] must be an object")
        for key in ("id", "answer_space"):
            if key not in q:
                raise ValueError(f"{p}: questions[{n}] has no {key!r}")
        try:
            spaces.append(
                AnswerSpace(
                    id=q["id"],
                    labels=tuple(q["answer_space"]),
                    ordered=tuple(q["ordered_labels"]) if q.get("ordered_labels") else None,
                    edge=tuple(q.get("edge_options") or ()),
                    reasoning_type=q.get("reasoning_type"),
                    topic=q.get("topic"),
                )
            )
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{p}: questions[{n}] ({q.get('id')!r}): {exc}") from None
        if not spaces[-1].labels:
            raise ValueError(f"{p}: questions[{n}] ({q['id']!r}): answer_space is empty")
    ids = [s.id for s in spaces]
    dup = [i for i, c in Counter(ids).items() if c > 1]
    if dup:
        raise ValueError(f"{p}: question id {dup[0]!r} appears twice")
    return list(sources), spaces


def load_atoms(path: str | Path, questions: Sequence[str]) -> list[Persona]:
    """Read an atoms file. Every line must answer every question; errors name the line."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"atoms file not found: {str(p)!r}")
    out: list[Persona] = []
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}:{n}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{p}:{n}: expected an object")
            for key in ("persona", "split", "atoms", "truth"):
                if key not in row:
                    raise ValueError(f"{p}:{n}: missing field {key!r}")
            atoms, truth = row["atoms"], row["truth"]
            if not isinstance(atoms, dict) or not isinstance(truth, dict):
                raise ValueError(f"{p}:{n}: 'atoms' and 'truth' must be objects")
            for q in questions:
                if q not in truth or not isinstance(truth[q], str):
                    raise ValueError(f"{p}:{n}: truth has no answer for question {q!r}")
                claims = atoms.get(q, {})
                if not isinstance(claims, dict):
                    raise ValueError(f"{p}:{n}: atoms[{q!r}] must be an object")
                for s, v in claims.items():
                    if v is not None and not isinstance(v, str):
                        raise ValueError(f"{p}:{n}: atoms[{q!r}][{s!r}] must be a string or null")
            out.append(
                Persona(
                    persona=str(row["persona"]),
                    split=str(row["split"]),
                    seed=str(row["seed"]) if row.get("seed") is not None else None,
                    difficulty=row.get("difficulty"),
                    atoms={q: dict(atoms.get(q, {})) for q in questions},
                    truth={q: truth[q] for q in questions},
                )
            )
    if not out:
        raise ValueError(f"{p}: no personas")
    return out


def cases(personas: Iterable[Persona], questions: Sequence[str]) -> list[LabelledCase]:
    """Every (persona, question) of ``personas`` as a labelled case."""
    return [LabelledCase(q, p.atoms[q], p.truth[q]) for p in personas for q in questions]


# -- baselines -----------------------------------------------------------------------------


class Plurality:
    """The answer most sources give; ties (and no claim at all) go to the answer most common
    in the fit data."""

    name = "plurality"

    def __init__(self, fit: Sequence[Persona], spaces: Sequence[AnswerSpace]) -> None:
        self._spaces = {s.id: s for s in spaces}
        self._freq = {s.id: Counter(p.truth[s.id] for p in fit) for s in spaces}

    def predict(self, question: str, claims: Mapping[str, str | None]) -> str:
        labels = self._spaces[question].labels
        votes = Counter(v for v in claims.values() if v in labels)
        freq = self._freq[question]
        return max(labels, key=lambda a: (votes.get(a, 0), freq.get(a, 0)))


class BestSingleSource:
    """Per question, the one source most often right on the fit data (a silent source counts
    as the fit data's most common answer)."""

    name = "best_single_source"

    def __init__(
        self, fit: Sequence[Persona], spaces: Sequence[AnswerSpace], sources: Sequence[str]
    ) -> None:
        self.choice: dict[str, str] = {}
        self._fallback: dict[str, str] = {}
        for s in spaces:
            freq = Counter(p.truth[s.id] for p in fit)
            self._fallback[s.id] = max(s.labels, key=lambda a: freq.get(a, 0))
            names = list(sources) or sorted({k for p in fit for k in p.atoms[s.id]})

            def score(src: str, q: str = s.id) -> int:
                return sum(self._pick(q, p.atoms[q], src) == p.truth[q] for p in fit)

            self.choice[s.id] = max(names, key=score) if names else ""

    def _pick(self, question: str, claims: Mapping[str, str | None], source: str) -> str:
        v = claims.get(source)
        return v if v is not None else self._fallback[question]

    def predict(self, question: str, claims: Mapping[str, str | None]) -> str:
        return self._pick(question, claims, self.choice[question])


# -- scoring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One scored test item."""

    persona: str
    question: str
    difficulty: str | None
    truth: str
    fusion: str | None
    margin: float
    answered: bool
    plurality: str
    best_single: str


def score_items(
    model: ReliabilityModel,
    plurality: Plurality,
    best: BestSingleSource,
    test: Sequence[Persona],
    questions: Sequence[str],
) -> list[Item]:
    """Run the model and the baselines on every test item."""
    out = []
    for p in test:
        for q in questions:
            post = model.posterior(q, p.atoms[q])
            out.append(
                Item(
                    p.persona,
                    q,
                    p.difficulty,
                    p.truth[q],
                    post.answer,
                    post.margin,
                    not post.abstain,
                    plurality.predict(q, p.atoms[q]),
                    best.predict(q, p.atoms[q]),
                )
            )
    return out


def _acc(items: Sequence[Item], attr: str) -> float:
    return sum(getattr(i, attr) == i.truth for i in items) / len(items) if items else 0.0


def summarize(items: Sequence[Item], questions: Sequence[str]) -> dict[str, Any]:
    """Macro accuracy (mean of per-question accuracy) for the model and baselines, and the
    selective mode's accuracy on answered items and coverage (over all items)."""
    by_q = {q: [i for i in items if i.question == q] for q in questions}
    by_q = {q: v for q, v in by_q.items() if v}
    answered = [i for i in items if i.answered]
    out: dict[str, Any] = {"items": len(items)}
    for attr, name in (
        ("fusion", "naive_bayes"),
        ("plurality", "plurality"),
        ("best_single", "best_single_source"),
    ):
        out[name] = sum(_acc(v, attr) for v in by_q.values()) / len(by_q) if by_q else 0.0
    out["selective_accuracy"] = _acc(answered, "fusion")
    out["coverage"] = len(answered) / len(items) if items else 0.0
    return out


def breakdown(
    items: Sequence[Item], key: str, questions: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """:func:`summarize` per value of an :class:`Item` attribute (``question``,
    ``difficulty``)."""
    groups: dict[str, list[Item]] = {}
    for i in items:
        groups.setdefault(str(getattr(i, key)), []).append(i)
    return {g: summarize(v, questions) for g, v in sorted(groups.items())}


def bootstrap(
    items: Sequence[Item],
    questions: Sequence[str],
    n: int,
    seed: int,
    *,
    progress: bool = False,
) -> dict[str, dict[str, float]]:
    """95% percentile intervals from resampling test personas with replacement."""
    from tqdm import tqdm

    by_p: dict[str, list[Item]] = {}
    for i in items:
        by_p.setdefault(i.persona, []).append(i)
    names = sorted(by_p)
    rng = random.Random(seed)
    keys = ("naive_bayes", "plurality", "best_single_source", "selective_accuracy", "coverage")
    draws: dict[str, list[float]] = {k: [] for k in keys}
    for _ in tqdm(range(n), desc="bootstrap", disable=not progress):
        sample = [it for _ in names for it in by_p[rng.choice(names)]]
        s = summarize(sample, questions)
        for k in keys:
            draws[k].append(s[k])
    out = {}
    for k, v in draws.items():
        v.sort()
        out[k] = {"low": v[int(0.025 * (n - 1))], "high": v[int(0.975 * (n - 1))]}
    return out


def evaluate(
    atoms: str | Path,
    questions_path: str | Path,
    *,
    selective: bool = False,
    fit_splits: Sequence[str] = ("train",),
    cal_splits: Sequence[str] = ("cal",),
    test_splits: Sequence[str] = ("test",),
    alpha: float = 1.0,
    beta: float = 0.5,
    target_accuracy: float | None = None,
    bootstrap_n: int = 0,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Fit, calibrate and score; returns the report (see ``docs/reliability.md``)."""
    sources, spaces = load_questions(questions_path)
    qids = [s.id for s in spaces]
    personas = load_atoms(atoms, qids)
    splits = Counter(p.split for p in personas)
    groups = {}
    for name, wanted in (("fit", fit_splits), ("cal", cal_splits), ("test", test_splits)):
        chosen = [p for p in personas if p.split in set(wanted)]
        if not chosen and (name != "cal" or selective):
            raise ValueError(
                f"--{name}-splits {','.join(wanted)}: no persona has that split "
                f"(the file has {', '.join(f'{k} {v}' for k, v in sorted(splits.items()))})"
            )
        groups[name] = chosen
    overlap = {p.persona for p in groups["test"]} & {
        p.persona for p in groups["fit"] + groups["cal"]
    }
    if overlap:
        raise ValueError(
            f"test persona {sorted(overlap)[0]!r} is also used for fitting or calibration"
        )
    model = ReliabilityModel(spaces, alpha=alpha)
    model.fit(cases(groups["fit"], qids))
    if selective:
        model.calibrate(cases(groups["cal"], qids), beta=beta, target_accuracy=target_accuracy)
    else:
        model.threshold = 0.0
    best = BestSingleSource(groups["fit"], spaces, sources)
    items = score_items(model, Plurality(groups["fit"], spaces), best, groups["test"], qids)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "data": {
            "atoms": str(atoms),
            "questions": str(questions_path),
            "seeds": sorted({p.seed for p in personas if p.seed is not None}),
            "splits": dict(sorted(splits.items())),
            "fit_splits": list(fit_splits),
            "cal_splits": list(cal_splits) if selective else [],
            "test_splits": list(test_splits),
            "personas": {k: len(v) for k, v in groups.items()},
        },
        "model": {
            "name": "naive_bayes",
            "args": {
                "alpha": alpha,
                "ordinal_decay": model.ordinal_decay,
                "source_prior": list(model.source_prior),
            },
            "calibration": (
                None
                if not selective
                else {"objective": "target_accuracy", "target_accuracy": target_accuracy}
                if target_accuracy is not None
                else {"objective": "f_beta", "beta": beta}
            ),
            "selective": selective,
            "threshold": model.threshold if selective else None,
            "temperatures": dict(model.temperature) if selective else None,
        },
        "overall": summarize(items, qids),
        "per_question": breakdown(items, "question", qids),
        "per_reasoning_type": {},
        "per_difficulty": breakdown(items, "difficulty", qids),
        "best_single_source_choice": {},
    }
    rtype = {s.id: s.reasoning_type or "-" for s in spaces}
    groups_rt: dict[str, list[str]] = {}
    for q in qids:
        groups_rt.setdefault(rtype[q], []).append(q)
    report["per_reasoning_type"] = {
        rt: summarize([i for i in items if i.question in set(qs)], qs)
        for rt, qs in sorted(groups_rt.items())
    }
    report["best_single_source_choice"] = best.choice
    if not selective:
        for block in (
            report["overall"],
            *report["per_question"].values(),
            *report["per_reasoning_type"].values(),
            *report["per_difficulty"].values(),
        ):
            block.pop("selective_accuracy", None)
            block.pop("coverage", None)
    if bootstrap_n > 0:
        report["bootstrap"] = {
            "n": bootstrap_n,
            "seed": seed,
            "resampled": "test personas",
            "intervals_95": bootstrap(items, qids, bootstrap_n, seed, progress=progress),
        }
        if not selective:
            for k in ("selective_accuracy", "coverage"):
                report["bootstrap"]["intervals_95"].pop(k)
    return report


def format_report(report: Mapping[str, Any]) -> str:
    """The report as the plain-text tables the command prints."""
    o = report["overall"]
    sel = report["model"]["selective"]
    lines = [
        f"fit {report['data']['personas']['fit']} personas "
        f"({','.join(report['data']['fit_splits'])}), "
        + (
            f"calibrate {report['data']['personas']['cal']} "
            f"({','.join(report['data']['cal_splits'])}), "
            if sel
            else ""
        )
        + f"test {report['data']['personas']['test']} ({','.join(report['data']['test_splits'])})",
        "",
        "macro accuracy:  naive_bayes {:.1%}   plurality {:.1%}   best_single_source {:.1%}".format(
            o["naive_bayes"], o["plurality"], o["best_single_source"]
        ),
    ]
    if sel:
        lines.append(
            f"selective:       accuracy {o['selective_accuracy']:.1%} at coverage "
            f"{o['coverage']:.1%} (margin threshold {report['model']['threshold']:.3f})"
        )
    if "bootstrap" in report:
        iv = report["bootstrap"]["intervals_95"]
        lines.append(
            f"bootstrap 95% ({report['bootstrap']['n']} resamples of test personas): "
            + "   ".join(f"{k} {v['low']:.1%}-{v['high']:.1%}" for k, v in iv.items())
        )
    head = f"{'':<22}{'naive_bayes':>12}{'plurality':>11}{'best_single':>12}"
    if sel:
        head += f"{'sel_acc':>9}{'coverage':>9}"
    for title, key in (
        ("question", "per_question"),
        ("reasoning type", "per_reasoning_type"),
        ("difficulty (reporting only)", "per_difficulty"),
    ):
        lines += ["", f"per {title}:", head]
        for name, r in report[key].items():
            row = (
                f"{name:<22}{r['naive_bayes']:>12.1%}{r['plurality']:>11.1%}"
                f"{r['best_single_source']:>12.1%}"
            )
            if sel:
                row += f"{r['selective_accuracy']:>9.1%}{r['coverage']:>9.1%}"
            lines.append(row)
    return "\n".join(lines)


# -- command line --------------------------------------------------------------------------


def _splits(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated split names, got {text!r}")
    return names


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this report."""
    parts = ["caap reliability eval"]
    if Path(args.atoms) != SHIPPED_ATOMS:
        parts.append(f"--atoms {args.atoms}")
    if Path(args.questions) != SHIPPED_QUESTIONS:
        parts.append(f"--questions {args.questions}")
    if args.selective:
        parts.append("--selective")
    if args.target_accuracy is not None:
        parts.append(f"--target-accuracy {args.target_accuracy}")
    for flag, value, default in (
        ("--fit-splits", args.fit_splits, ["train"]),
        ("--cal-splits", args.cal_splits, ["cal"]),
        ("--test-splits", args.test_splits, ["test"]),
    ):
        if value != default:
            parts.append(f"{flag} {','.join(value)}")
    if args.alpha != 1.0:
        parts.append(f"--alpha {args.alpha}")
    if args.bootstrap:
        parts.append(f"--bootstrap {args.bootstrap} --seed {args.seed}")
    parts.append(f"--out {args.out}")
    return " ".join(parts)


def cmd_eval(args: argparse.Namespace) -> int:
    """Fit, calibrate and score; print the tables and write the JSON report."""
    if args.alpha <= 0:
        raise ValueError(f"--alpha must be > 0, got {args.alpha}")
    report = evaluate(
        args.atoms,
        args.questions,
        selective=args.selective,
        fit_splits=args.fit_splits,
        cal_splits=args.cal_splits,
        test_splits=args.test_splits,
        alpha=args.alpha,
        target_accuracy=args.target_accuracy,
        bootstrap_n=args.bootstrap,
        seed=args.seed,
        progress=not args.quiet,
    )
    report["command"] = _command(args)
    print(format_report(report))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


def add_reliability_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``reliability eval`` to the ``caap`` command's subparsers."""
    rel: argparse.ArgumentParser = subparsers.add_parser(
        "reliability", help="source-reliability fusion: evaluate on multi-source atom files"
    )
    sub = rel.add_subparsers(dest="reliability_command", metavar="COMMAND")

    def usage(_args: argparse.Namespace) -> int:
        rel.print_help()
        return 2

    rel.set_defaults(handler=usage)
    p = sub.add_parser(
        "eval",
        help="fit on train, calibrate on cal, score test; baselines side by side",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--atoms",
        default=str(SHIPPED_ATOMS),
        metavar="PATH",
        help="atoms file (JSON Lines, or .jsonl.gz); default: the shipped seed",
    )
    p.add_argument(
        "--questions",
        default=str(SHIPPED_QUESTIONS),
        metavar="PATH",
        help="questions file (JSON); default: the shipped seed's questions",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="write the JSON report here")
    p.add_argument(
        "--selective", action="store_true", help="abstain below a margin calibrated on cal"
    )
    p.add_argument(
        "--target-accuracy",
        type=fraction,
        metavar="A",
        help="with --selective: the lowest threshold reaching this accuracy on cal, instead "
        "of the F0.5 optimum",
    )
    p.add_argument("--fit-splits", type=_splits, default=["train"], metavar="S[,S]")
    p.add_argument("--cal-splits", type=_splits, default=["cal"], metavar="S[,S]")
    p.add_argument("--test-splits", type=_splits, default=["test"], metavar="S[,S]")
    p.add_argument("--alpha", type=float, default=1.0, help="Dirichlet smoothing (default 1)")
    p.add_argument(
        "--bootstrap",
        type=non_negative,
        default=0,
        metavar="N",
        help="95%% intervals from N resamples of the test personas (default: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_eval)
    return rel
