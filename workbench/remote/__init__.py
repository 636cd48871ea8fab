"""Compute near the data: run workbench jobs with a host's own python, where the tensors live.

Training data and captures on a GPU host are gigabytes; a verdict is a few kilobytes. The
workbench ships the core modules a job needs (``workbench.remote.bundle``: a content-hashed,
versioned bundle, uploaded once per version over SFTP), runs the job there with the host's python
(numpy, torch and safetensors are all it needs; the host's GPU is used when torch sees one) and
brings back only the JSON result, with an account of the bytes moved (``Transfer``).

    from workbench.remote import NearCompute
    near = NearCompute(host)                       # a workbench.hosts.Host
    result, transfer = near.run("align", {"train": "/data/rows", "infer": "/data/dump"})
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the type checker only: at run time they come through __getattr__ below
    from workbench.remote.near import NearCompute, RemoteJobError, Transfer

__all__ = ["NearCompute", "RemoteJobError", "Transfer"]


def __getattr__(name: str) -> object:
    # Lazy: this package is shipped to hosts, where only the job modules may be imported.
    if name in __all__:
        from workbench.remote import near

        return getattr(near, name)
    raise AttributeError(name)
