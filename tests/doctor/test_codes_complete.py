"""The closing check: every finding code has a test that makes it fire."""

from workbench.doctor import CODES


def test_every_code_has_a_test():
    import pathlib

    text = "".join(p.read_text() for p in pathlib.Path(__file__).parent.glob("test_*.py"))
    missing = [c for c in CODES if f'"{c}"' not in text]
    assert missing == [], missing
