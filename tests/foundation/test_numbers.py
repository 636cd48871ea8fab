import math

import pytest

from workbench.errors import InputError
from workbench.numbers import NON_NEGATIVE, PORT, POSITIVE, Range, integer, number


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1e400", float("nan"), math.inf, True, None, "x", "9" * 80])
def test_number_refuses_non_finite_and_non_numbers(bad):
    with pytest.raises(InputError, match=r"^grace: "):
        number(bad, "grace", NON_NEGATIVE)


def test_number_ranges_name_the_bound():
    assert number("2.5", "grace", POSITIVE) == 2.5
    with pytest.raises(InputError, match="out of range; expected > 0"):
        number(0, "grace", POSITIVE)
    with pytest.raises(InputError, match=r"in \[0, 1\]"):
        number(1.5, "acc", Range(0, 1))
    with pytest.raises(InputError, match="string"):
        number("3", "field", allow_str=False)


@pytest.mark.parametrize("bad", [16.5, "16.5", "abc", True, float("inf"), 10**40, "1" * 5000])
def test_integer_refuses(bad):
    with pytest.raises(InputError, match=r"^hidden_size: "):
        integer(bad, "hidden_size", POSITIVE)


def test_integer_accepts_whole_values():
    assert integer(16.0, "n") == 16
    assert integer(" 8000 ", "port", PORT) == 8000
    with pytest.raises(InputError, match="string"):
        integer("16", "hidden_size", allow_str=False)
    with pytest.raises(InputError, match="out of range"):
        integer(70000, "port", PORT)
