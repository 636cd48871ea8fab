"""``Measurement.accept_length`` is the stored row's rule (``measure.accept_length``) on the live object."""

from __future__ import annotations

from workbench.servers.measure import Measurement, accept_length


def _m(server_al):
    return Measurement(1, 8, 4, 64, 1, 512, 3.0, 170.0, {"mean": 40.0}, {"mean": 2.5, "stdev": 0.1}, server_al)


def test_the_servers_average_wins_when_reported_zero_included():
    assert _m(3.1).accept_length == 3.1
    assert _m(0.0).accept_length == 0.0
    assert _m(3.1).accept_length == accept_length(_m(3.1).to_dict())


def test_without_the_servers_average_the_per_request_mean():
    assert _m(None).accept_length == 2.5


def test_a_sweep_points_row_carries_its_mean_itself():
    assert accept_length({"accept_len": 2.25, "server_accept_len": None}) == 2.25
    assert accept_length({"accept_len": None}) is None
