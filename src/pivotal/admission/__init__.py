"""Admission: the one way a new plan becomes a saga. ``admit`` runs the stages (``shape``;
``checks``: names, facts and rules; ``value``: value moved and exposure) over what it is
given, and reads the verdict from a declared table (``table``)."""

from pivotal.admission.admit import ROLLOUT_BATCH, STAGES, Admission, Given, Stage, admit
from pivotal.admission.table import TABLE, Above, Finding, Row, Verdict, decide

__all__ = [
    "ROLLOUT_BATCH",
    "STAGES",
    "TABLE",
    "Above",
    "Admission",
    "Finding",
    "Given",
    "Row",
    "Stage",
    "Verdict",
    "admit",
    "decide",
]
