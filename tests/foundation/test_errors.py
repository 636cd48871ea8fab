"""A WorkbenchError is one line whatever reached its message (a library's text, a value from a file)."""

from __future__ import annotations

import pytest

from workbench.errors import ConfirmationRequired, InputError, WorkbenchError


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("x.safetensors: shape must be a list, got \n", "x.safetensors: shape must be a list, got"),
        ("a.pt: corrupt (ValueError: bad\n\tvalue\r\n  more)", "a.pt: corrupt (ValueError: bad value more)"),
        ("one line,  two spaces kept", "one line,  two spaces kept"),
        ("carriage\rreturn", "carriage return"),
    ],
)
def test_every_message_is_one_line(raw, shown):
    for cls in (WorkbenchError, InputError):
        err = cls(raw)
        assert str(err) == shown and "\n" not in str(err) and "\r" not in str(err)
    assert InputError(raw).exit_code == 2


def test_a_refused_confirmation_names_its_plan_in_one_line():
    from workbench.confirm import Plan

    plan = Plan("stop", "server 3", "stop server 3 (SIGTERM to its group)", ["SIGTERM to pid 41", "then SIGKILL"])
    err = ConfirmationRequired(plan)
    assert str(err) == "stop server 3 (SIGTERM to its group) (not done: pass confirm=True / --yes)"
    assert err.plan.text().count("\n") == 2  # the plan itself keeps its lines for the faces
