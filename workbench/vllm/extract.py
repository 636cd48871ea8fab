"""Hidden states out of a vLLM server by vLLM's own route: a relaunch of the same target with the
speculative method ``extract_hidden_states`` and a hidden-state KV connector, which writes the states
vLLM captures for ``eagle_aux_hidden_state_layer_ids`` to one safetensors file per request
(``hidden_states`` [tokens, ids, hidden], ``token_ids``) and answers its path in
``kv_transfer_params["hidden_states_path"]`` (what speculators' data generation uses).

Asked for every id from 0 to N, the relaunch captures every residual-stream point vLLM can feed a
drafter (id k = the output of layer k-1, 0 = the embedding, N = the last layer's output before the
final norm): the alignment then names the points training used, and vLLM's rule the ids that
capture them. vLLM takes the ids sorted and once each (``EagleModelMixin._set_aux_hidden_state_layers``),
so the file's states are in ascending id order.

On a CPU build vLLM's ``ExampleHiddenStatesConnector`` cannot write (it copies through CUDA streams
into pinned memory); ``CPUHiddenStatesConnector`` (``cpu_connector.py``) is that connector with the
copy made the CPU's, loaded by module path from a folder on the server's ``PYTHONPATH``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.hosts.base import Host
    from workbench.servers.profiles import Profile

CONNECTOR = "ExampleHiddenStatesConnector"
CPU_CONNECTOR = "CPUHiddenStatesConnector"
CPU_MODULE = "workbench.vllm.cpu_connector"
_SHIPPED = ("workbench/__init__.py", "workbench/vllm/__init__.py", "workbench/vllm/cpu_connector.py")


def all_ids(num_layers: int) -> list[int]:
    """Every id vLLM captures for a target of ``num_layers`` layers: 0 (embedding) .. N."""
    return list(range(num_layers + 1))


def speculative_config(ids: list[int]) -> dict[str, Any]:
    return {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": sorted(set(ids))}},
    }


def kv_transfer_config(folder: str, cpu: bool) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "kv_connector": CPU_CONNECTOR if cpu else CONNECTOR,
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": folder},
    }
    if cpu:
        cfg["kv_connector_module_path"] = CPU_MODULE
    return cfg


def connector_root(host: Host) -> str:
    """A folder on ``host`` whose ``workbench/vllm/cpu_connector.py`` the server can import: this
    package's own folder on this machine, else the three files written once per content to the host."""
    from workbench.hosts.local import LocalHost

    root = Path(__file__).resolve().parents[2]
    if isinstance(host, LocalHost):
        return str(root)
    blobs = {rel: (root / rel).read_bytes() for rel in _SHIPPED}
    digest = hashlib.sha256(b"".join(blobs[r] for r in _SHIPPED)).hexdigest()[:16]
    base = f"~/.cache/eagle-workbench/vllm-connector/{digest}"
    home = host.run(["sh", "-c", 'printf %s "$HOME"'], timeout=30).out.strip() or "."
    base = base.replace("~", home, 1)
    for rel, data in blobs.items():
        if not host.exists(f"{base}/{rel}"):
            host.write_bytes(f"{base}/{rel}", data)
    return base


def extraction_table(
    parent: Profile, port: int, folder: str, num_layers: int, *, cpu: bool, pythonpath: str | None, log: str
) -> dict[str, Any]:
    """A flat session profile: the parent's target, engine, launcher, host and arguments, without its draft,
    serving ``extract_hidden_states`` for every id into ``folder``."""
    env = dict(parent.env)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    table: dict[str, Any] = {
        "engine": "vllm",
        "host": parent.host,
        "model": parent.model,
        "port": port,
        "log": log,
        "env": env,
        "args": [
            *parent.args,
            "--speculative-config",
            json.dumps(speculative_config(all_ids(num_layers)), separators=(",", ":")),
            "--kv-transfer-config",
            json.dumps(kv_transfer_config(folder, cpu), separators=(",", ":")),
        ],
        "description": f"hidden-state extraction of {parent.name} for the live doctor",
        "stop_grace": parent.stop_grace,
        "ready_timeout": parent.ready_timeout,
    }
    for key in ("launcher", "run_dir", "gpus", "vllm_version"):
        value = getattr(parent, key)
        if value is not None:
            table[key] = value
    return table
