"""The diagnosis loop on a live server: measure, predict, compare hidden states, fix, relaunch, compare.

- ``workbench.live.doctor``: ``diagnose`` a running server (static checks on the config it loaded,
  observed vs predicted accept length, hidden-state alignment near the data, ranked findings);
- ``workbench.live.fix``: apply a fix through the config history, relaunch the same profile,
  measure again, compare before and after;
- ``workbench.live.demo``: the story in the lab, as a workspace and a scripted run.

These modules drive servers through the Workbench's own operations (launch, measure, stop), so
every step is journaled exactly as when a user does it by hand.
"""
