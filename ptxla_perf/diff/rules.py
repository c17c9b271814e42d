"""`--fail-on` rules: parse them, and check a comparison against them (the CI gate)."""
from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass

from .metrics_text import parse_value
from .compare import NOISE_ROWS, Comparison, _json_num
from ..model.fmt import value as format_value
from . import findings as F
from .sources import ALIASES, Source


class RuleError(ValueError):
    """A `--fail-on` rule that does not parse, or names something neither input has."""


_RULE_RE = re.compile(
    r"^\s*(?P<name>[^\s<>=!]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*"
    r"(?P<sign>[+-])?(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>%|[A-Za-z]+)?\s*$")
_OPS = {">": lambda x, t: x > t, ">=": lambda x, t: x >= t, "<": lambda x, t: x < t,
        "<=": lambda x, t: x <= t, "==": lambda x, t: x == t, "!=": lambda x, t: x != t}


@dataclass
class Rule:
    text: str
    name: str  # a row name, `NAME.p50`-style metric field, `X_per_step`, or a glob (`aten::*`)
    op: str
    threshold: float  # percent for 'relative'; normalised units (s, B) otherwise
    mode: str  # 'absolute' (B's value) | 'delta' (B - A, threshold written +N / -N) | 'relative' (% change B vs A)
    unit: str | None = None  # 's' | 'B' when the threshold carried a unit

    @property
    def is_glob(self) -> bool:
        return any(ch in self.name for ch in "*?[")


@dataclass
class Violation:
    rule: str
    name: str
    a: float | None
    b: float | None
    value: float  # what was compared: B, B - A or the % change
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "name": self.name, "a": _json_num(self.a), "b": _json_num(self.b),
                "value": _json_num(self.value), "message": self.message}


def parse_rules(spec: str | list[str] | None) -> list[Rule]:
    """`compiles>0,device_to_host_per_step>0,step_time_p50>+5%,aten::*>0` -> rules. Raises RuleError.

    Threshold forms: `N` compares B's value; `+N` / `-N` compares B - A; `N%` / `+N%` / `-N%` compares the
    percentage change from A to B. A threshold may carry a unit (`0.5s`, `20ms`, `100us`, `1MB`, `512B`)."""
    if spec is None:
        return []
    pieces = spec if isinstance(spec, list) else [spec]
    rules: list[Rule] = []
    for piece in pieces:
        for text in str(piece).split(","):
            text = text.strip()
            if not text:
                continue
            m = _RULE_RE.match(text)
            if not m:
                raise RuleError(f"bad rule {text!r}: expected NAME OP THRESHOLD, e.g. 'compiles>0', "
                                "'step_time_p50>+5%', 'aten::*>0' (OP one of > >= < <= == !=)")
            sign, num, unit = m.group("sign"), float(m.group("num")), m.group("unit")
            value = -num if sign == "-" else num
            norm_unit = None
            if unit == "%":
                mode = "relative"
            else:
                mode = "delta" if sign else "absolute"
                if unit:
                    parsed = parse_value(f"{num}{unit}" if unit in ("B", "KB", "MB", "GB", "TB", "PB")
                                         else f"{m.group('num')}{unit}")
                    if parsed is None or parsed[1] is None:
                        raise RuleError(f"bad rule {text!r}: unknown unit {unit!r} "
                                        "(use %, us, ms, s, m, h, B, KB, MB, GB, TB, PB)")
                    value = -parsed[0] if sign == "-" else parsed[0]
                    norm_unit = parsed[1]
            rules.append(Rule(text=text, name=ALIASES.get(m.group("name"), m.group("name")), op=m.group("op"),
                              threshold=value, mode=mode, unit=norm_unit))
    if not rules:
        raise RuleError("no rules given (e.g. --fail-on 'compiles>+0,device_to_host_per_step>0')")
    return rules


def _resolve(src: Source, other: Source, name: str) -> tuple[float | None, str | None] | None:
    """src's value for a rule name; names absent from src that mean zero there (counters torch_xla omits while
    zero, fallback ops, fields of a metric with no samples on this side) resolve to 0."""
    if F.is_rule_name(name):
        return _finding_count(src, other, name)
    found = src.lookup(name)
    if found is not None:
        return found
    other_found = other.lookup(name)
    base = name.removesuffix("_per_step")
    if src.absent_means_zero(name) and (other_found is not None or base.startswith(("aten::", "xla::"))):
        if name.endswith("_per_step") and not src.steps:
            return None, None
        return 0.0, (other_found or (None, None))[1]
    if src.kind == "metrics_text" and other_found is not None and other.snapshot is not None:
        metric = base.rpartition(".")[0] if "." in base else base
        if metric in other.snapshot.metrics:  # the metric has no samples on this side
            if name.endswith("_per_step") and not src.steps:
                return None, None
            return 0.0, other_found[1]
    return None


def _finding_count(src: Source, other: Source, name: str) -> tuple[float | None, None] | None:
    """`warnings:KIND`-style counts: a report's findings of that kind and severity; 0 when its rules judged KIND
    and found nothing. None for metrics text (it has no findings) and for a kind neither report knows (a typo)."""
    if src.findings is None:
        return None
    kind = name.partition(":")[2]
    known = src.judged | other.judged | {f.kind for f in src.findings + (other.findings or [])}
    if kind and kind not in known:
        return None
    return F.count(src.findings, name), None


def unmeasured(comparison: Comparison) -> list[Violation]:
    """One violation for each side that measured nothing (a report with no steady step or a `no_steps` finding):
    a CI gate that passed there would pass because nothing was measured."""
    out = []
    for side, src in (("A", comparison.a), ("B", comparison.b)):
        if src.unmeasured:
            steps = src.values.get("steps", (None, None))[0]
            out.append(Violation(rule="measured", name="steps", a=None, b=None, value=steps or 0.0,
                                 message=f"{src.label or side} measured nothing: {src.unmeasured}; no rule is "
                                         "judged on an empty measurement (profile a run that reaches its steady "
                                         "steps)"))
    return out


def check(comparison: Comparison, rules: list[Rule] | str, strict: bool = False) -> list[Violation]:
    """Evaluate rules on a comparison; return the broken ones (empty list: all passed). Raises RuleError for a
    rule whose name neither input knows, or that needs a value an input cannot provide (e.g. step_time_p50 from
    metrics text, X_per_step without a step count). A +N or N% rule on a step-time row that breaks with a change
    within `comparison.noise_band_s` goes to `comparison.within_noise` instead, unless `strict`."""
    if isinstance(rules, str):
        rules = parse_rules(rules)
    a, b = comparison.a, comparison.b
    comparison.within_noise = []
    empty = unmeasured(comparison)
    if empty and rules:  # a gate never passes on nothing: no rule is judged on an empty measurement
        return empty
    broken: list[Violation] = []
    for rule in rules:
        if rule.is_glob:
            names = sorted({n for n in (*a.values, *b.values) if fnmatch.fnmatchcase(n, rule.name)}
                           | {n + "_per_step" for n in (*a.fallback, *b.fallback)
                              if rule.name.endswith("_per_step")
                              and fnmatch.fnmatchcase(n + "_per_step", rule.name)})
            names += sorted(n for n in F.rule_names((a.findings or []) + (b.findings or []))
                            if fnmatch.fnmatchcase(n, rule.name))
        else:
            names = [rule.name]
        for name in names:
            vb = _resolve(b, a, name)
            va = _resolve(a, b, name)
            if vb is None and va is None and not rule.is_glob:
                hint = ""
                if name.startswith("step_time") and b.kind == "metrics_text":
                    hint = " (metrics text has no wall-clock step times; try execute_time_s_per_step)"
                elif F.is_rule_name(name):
                    hint = (" (finding counts need report JSON)" if b.findings is None or a.findings is None else
                            f" (no finding kind {name.partition(':')[2]!r}; the reports judge: "
                            f"{', '.join(sorted(a.judged | b.judged)) or 'nothing'})")
                raise RuleError(f"rule {rule.text!r}: neither input has {name!r}{hint}")
            if vb is None or vb[0] is None:
                if rule.is_glob:
                    continue
                raise RuleError(f"rule {rule.text!r}: {b.label or 'B'} has no value for {name!r}"
                                + (" (its step count is unknown)" if name.endswith("_per_step") else ""))
            unit = vb[1]
            if rule.unit is not None and unit is not None and rule.unit != unit:
                raise RuleError(f"rule {rule.text!r}: {name} is in {unit!r}, the threshold in {rule.unit!r}")
            bval = vb[0]
            aval = va[0] if va is not None else None
            if rule.mode == "absolute":
                value = bval
                desc = f"B = {format_value(bval, unit)}"
            else:
                if aval is None:
                    if rule.is_glob:
                        continue
                    raise RuleError(f"rule {rule.text!r}: {a.label or 'A'} has no value for {name!r}, "
                                    "which a relative rule needs")
                if rule.mode == "delta":
                    value = bval - aval
                    desc = (f"B - A = {'+' if value >= 0 else ''}{format_value(value, unit)} "
                            f"(A {format_value(aval, unit)} -> B {format_value(bval, unit)})")
                else:
                    if aval == 0:
                        value = 0.0 if bval == 0 else math.copysign(math.inf, bval)
                    else:
                        value = (bval - aval) / abs(aval) * 100.0
                    desc = (f"change {value:+.1f}% (A {format_value(aval, unit)} -> "
                            f"B {format_value(bval, unit)})")
            if _OPS[rule.op](value, rule.threshold):
                band = comparison.noise_band_s
                noise = rule.mode != "absolute" and name in NOISE_ROWS and band is not None and \
                    comparison.step_time_noise
                if noise:
                    desc += (f", within the noise band +/-{format_value(band, 's')} (the larger per-step spread "
                             "p90 - p50 of A and B)")
                v = Violation(rule=rule.text, name=name, a=aval, b=bval, value=value,
                              message=f"{rule.text}: {name}: {desc}")
                (comparison.within_noise if noise and not strict else broken).append(v)
    return broken
