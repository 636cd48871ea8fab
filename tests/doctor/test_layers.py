"""Points and conventions (the vocabulary) against the reference's worked examples; what each release
captures for them is tests/engine/."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.errors import InputError
from workbench.layers import (
    EMBED,
    FINAL_POSTNORM,
    FINAL_PRENORM,
    Point,
    convert,
    default_ids,
    from_points,
    parse_points,
    to_points,
)


def test_point_spelling_parse_and_order():
    assert [str(p) for p in (EMBED, Point.out(7), FINAL_PRENORM, FINAL_POSTNORM)] == [
        "embed",
        "out(7)",
        "final-prenorm",
        "final-postnorm",
    ]
    for text in ("embed", "out(0)", "out(58)", "final-prenorm", "final-postnorm"):
        assert str(Point.parse(text)) == text
    assert Point.parse(" OUT( 3 ) ") == Point.out(3)
    assert sorted([FINAL_POSTNORM, Point.out(30), EMBED, Point.out(2)]) == [
        EMBED,
        Point.out(2),
        Point.out(30),
        FINAL_POSTNORM,
    ]
    assert len({Point.out(2), Point("out", 2)}) == 1
    assert parse_points("out(2), out(30),out(58)") == [Point.out(2), Point.out(30), Point.out(58)]
    for bad in ("out(-1)", "layer 3", "", "out(x)"):
        with pytest.raises(InputError):
            Point.parse(bad)


def test_conventions_examples():
    # Llama-3.1-8B: A [1,15,28] = B [2,16,29] = HF hs[2,16,29]
    assert convert([1, 15, 28], "output-of-layer", "capture-before", 32) == [2, 16, 29]
    assert convert([1, 15, 28], "output-of-layer", "hf-index", 32) == [2, 16, 29]
    assert default_ids(61) == [1, 29, 57] and default_ids(61, "capture-before") == [2, 30, 58]
    assert to_points([-1], "output-of-layer", 61) == [EMBED]
    assert to_points([0, 61], "capture-before", 61) == [EMBED, Point.out(60)]
    assert to_points([0, 61, -1], "hf-index", 61) == [EMBED, FINAL_POSTNORM, FINAL_POSTNORM]
    assert from_points([FINAL_PRENORM], "capture-before", 61) == [61]
    with pytest.raises(InputError, match="out of range"):
        to_points([61], "output-of-layer", 61)
    with pytest.raises(InputError, match="no hf-index id"):
        from_points([FINAL_PRENORM], "hf-index", 61)  # hs[N] is post-norm
    with pytest.raises(InputError, match="convention"):
        to_points([1], "sideways", 61)
    with pytest.raises(InputError, match="integer"):
        to_points(["2"], "output-of-layer", 61)


@given(n=st.integers(2, 128), data=st.data())
def test_conventions_round_trip(n, data):
    k = data.draw(st.integers(-1, n - 2))
    for conv in ("output-of-layer", "capture-before", "hf-index"):
        ids = from_points(to_points([k], "output-of-layer", n), conv, n)
        assert to_points(ids, conv, n) == to_points([k], "output-of-layer", n)
