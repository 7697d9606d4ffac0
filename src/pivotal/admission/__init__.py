"""Admission: the one way a new plan becomes a saga, with its verdicts declared as a table
(``table``), the stages that find what the verdict reads (``admit``), and the record a
rollout keeps of a plan it held back (``records``)."""

from pivotal.admission.admit import Admission, admit
from pivotal.admission.records import ROLLOUT_BATCH
from pivotal.admission.table import TABLE, Above, Finding, Row, Verdict, decide

__all__ = [
    "ROLLOUT_BATCH",
    "TABLE",
    "Above",
    "Admission",
    "Finding",
    "Row",
    "Verdict",
    "admit",
    "decide",
]
