"""Workers for fault-injection tests (importable by Ray actor processes, like vidlab.distributed.toy)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from vidlab.generation.compbench.worker import CompbenchWorker


class HangOnceWorker(CompbenchWorker):
    """Like CompbenchWorker, but the first attempt at item ``hang_id`` writes ``marker`` (holding the Ray
    actor's name) and sleeps, so a test can kill that actor mid-item; later attempts run normally."""

    def __init__(
        self,
        generate: dict[str, Any],
        out: str,
        measure_layout: bool = False,
        hang_id: str = "",
        marker: str = "",
    ) -> None:
        super().__init__(generate, out, measure_layout)
        self.hang_id, self.marker = hang_id, marker

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if item["id"] == self.hang_id and self.marker and not Path(self.marker).exists():
            name = ""
            try:
                import ray

                name = ray.get_runtime_context().get_actor_name() or ""
            except Exception:  # noqa: BLE001 - not in Ray
                pass
            tmp = Path(f"{self.marker}.tmp")
            tmp.write_text(name)
            os.replace(tmp, self.marker)
            time.sleep(600)  # killed before this returns (a hang guard, reached only by a failed test)
        return super().process(item)


class FailUntilFixedWorker(CompbenchWorker):
    """Like CompbenchWorker, but items in ``fail_ids`` raise until the file ``fix_file`` exists."""

    def __init__(
        self,
        generate: dict[str, Any],
        out: str,
        measure_layout: bool = False,
        fail_ids: tuple[str, ...] = (),
        fix_file: str = "",
    ) -> None:
        super().__init__(generate, out, measure_layout)
        self.fail_ids, self.fix_file = set(fail_ids), fix_file

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if item["id"] in self.fail_ids and not (self.fix_file and Path(self.fix_file).exists()):
            raise RuntimeError(f"injected failure for {item['id']}")
        return super().process(item)
