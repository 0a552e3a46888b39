"""VllmProcess's housekeeping, with a stand-in command in place of vLLM (no model needed)."""

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from serving.vllm_process import VllmOptions, VllmProcess, VllmStartError

# What vLLM does with VLLM_RPC_BASE_PATH: names its ZeroMQ sockets there. Then it dies.
LEAVES_A_SOCKET_AND_DIES = (
    "import os, pathlib, uuid; "
    "pathlib.Path(os.environ['VLLM_RPC_BASE_PATH'], str(uuid.uuid4())).touch(); "
    "print('sockets in', os.environ['VLLM_RPC_BASE_PATH'], flush=True); "
    "raise SystemExit(1)"
)


@dataclass(frozen=True)
class StandIn(VllmOptions):
    def command(self, host: str, port: int) -> list[str]:
        return [sys.executable, "-c", LEAVES_A_SOCKET_AND_DIES]


def test_the_sockets_vllm_leaves_go_with_it(tmp_path):
    process = VllmProcess(StandIn(model=tmp_path), log_path=tmp_path / "vllm.log")

    with pytest.raises(VllmStartError, match="exited with code 1"):
        process.start(timeout=30)

    sockets = Path(process.log_tail().split("sockets in ")[1].split()[0])
    assert sockets.name.startswith("vllm-") and len(str(sockets / ("x" * 36))) < 107
    assert not sockets.exists()
