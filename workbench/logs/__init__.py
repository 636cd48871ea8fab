"""SGLang's and vLLM's logs, read as their users see them.

One record per line a user acts on, in line order (dicts; ``workbench.logs.parser``):

- every record: ``kind``, ``engine`` ("sglang" / "vllm" / None), ``line`` (1-based), ``time`` (the
  engine's stamp as printed, else the line's container stamp, else the last stamp above), ``rank``
  ("TP0", "DP1 TP8"; from a vLLM process name "EngineCore_DP0" -> "DP0"; None where the line names none);
  where the line says so: ``process`` and ``pid`` (vLLM's "(EngineCore_DP0 pid=N)"), ``level`` (other
  than INFO), ``src`` (vLLM's "file.py:line"), ``task`` (srun's "0: "), ``container`` (compose/kubectl);
- ``decode`` / ``prefill`` (SGLang's periodic lines): ``bulk.DECODE_FIELDS`` / ``bulk.PREFILL_FIELDS``
  (None where the line lacks one), other items under their own names, ``nonfinite`` where a printed value
  was not a finite number;
- ``metrics`` (vLLM's periodic lines): ``name`` "throughput" (``bulk.THROUGHPUT_FIELDS``) or
  "spec_decode" (``bulk.SPEC_FIELDS``: ``accept_len``, ``per_position``, ...); percentages as fractions;
- ``milestone`` (a startup stage) and ``ready``: ``name``, ``text`` and the stage's numbers (``role``,
  ``phase``, ``elapsed_s``, ``avail_mem_gb``, ``tokens``, ``layers``, ...);
- ``warning``: ``name`` (None where it has no name here), ``text``;
- ``failure``: ``class`` (``FAILURE_CLASSES``), ``what`` (a sub-kind), ``text`` (the engine's message),
  ``exception`` (a traceback's final exception), ``hint``, ``end_line`` (where its traceback ends),
  ``exit_code`` / ``port`` / ``tokens`` where the message gives them.

    parse_text(text).records                      # a whole log
    LogParser().feed(chunk) -> Scan               # a growing log (Scan.records, .unrecognised, .samples)
    Reading(fh, kinds).json_bytes() / .records()  # a file, streamed; .summary(), .is_log afterwards
    Follower().feed(data, offset)                 # a server's live state: events, series, progress()
    classify(records, exit_code, process_alive)   # the failure that explains a dead server
"""

from workbench.logs.failures import FAILURE_CLASSES, HINTS, classify
from workbench.logs.parser import LogParser, Scan, parse_text, stream_records
from workbench.logs.reading import Reading

__all__ = ["FAILURE_CLASSES", "HINTS", "LogParser", "Reading", "Scan", "classify", "parse_text", "stream_records"]
