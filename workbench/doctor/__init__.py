"""The doctor: named, evidenced findings about an EAGLE-3 deployment, from the files alone."""

from workbench.doctor.capture import CaptureReport, CaptureRow
from workbench.doctor.findings import CODES, EVIDENCE_CLASSES, SEVERITIES, ConfigEdit, Finding, Fix, sort_findings
from workbench.doctor.static import ALGORITHMS, DoctorReport, normalize_algorithm, run_static

__all__ = [
    "ALGORITHMS",
    "CODES",
    "EVIDENCE_CLASSES",
    "SEVERITIES",
    "CaptureReport",
    "CaptureRow",
    "ConfigEdit",
    "DoctorReport",
    "Finding",
    "Fix",
    "normalize_algorithm",
    "run_static",
    "sort_findings",
]
