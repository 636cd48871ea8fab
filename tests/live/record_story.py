"""Record tests/live/data/story.json: the demo's live doctor report and before/after comparison,
from a real run on the small lab world, with the machine's paths replaced by a user's usual ones.

    python tests/live/record_story.py     # then: pytest tests/live/test_screens.py --snapshot-update
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from workbench.api import Workbench
    from workbench.lab.build import default_cache_root
    from workbench.live import demo as D

    with tempfile.TemporaryDirectory(prefix="story-") as tmp:
        wb = Workbench.open(tmp)
        try:
            setup = D.prepare(wb, "small")
            sid = D.launch_story(wb, setup).id
            D.measure_story(wb, sid, 32)  # the CLI default
            report = wb.doctor_live(sid, setup.training_data, samples=4, measure=False, dump="yes", dump_alongside=True)
            out = wb.live_fix(sid, report.fix, confirm=True, measure_tokens=32)
            data = {"report": report.to_dict(), "comparison": out.comparison.to_dict()}
        finally:
            D.stop_demo_servers(wb)
            wb.close()
        text = json.dumps(data, indent=1)
        text = text.replace(str(Path(tmp)), "/home/you/.eagle-workbench/demo")
        text = text.replace(str(default_cache_root()), "/home/you/.cache/eagle-workbench/lab")
    out_path = Path(__file__).with_name("data") / "story.json"
    out_path.write_text(text + "\n")
    print(
        f"{out_path}: before {data['comparison']['before'].get('accept_length')}, "
        f"after {data['comparison']['after'].get('accept_length')}"
    )


if __name__ == "__main__":
    main()
