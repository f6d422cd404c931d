"""The first lease of a shared observer imports the official client in a worker thread,
with collection paused for the import and the start-up heap frozen after it (so that the
import's allocations never start a full collection that would stall the event loop). Each
case runs in a fresh interpreter: this one has imported the client long ago."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, gc, json, sys, threading
from jobset_core.observe import _shared

seen = {}

def spy():
    seen["thread"] = threading.current_thread() is not threading.main_thread()
    return real()

real, _shared._import_client = _shared._import_client, spy
gc_before = gc.isenabled()
{prepare}
assert "jobset_core.client._client" not in sys.modules
async def main():
    first = await asyncio.gather(*(asyncio.to_thread(_shared._import_client) for _ in range(3)))
    return first
modules = asyncio.run(main())
print(json.dumps({
    **seen,
    "same": len({id(m) for m in modules}) == 1 and all(hasattr(m, "Client") for m in modules),
    "gc_after": gc.isenabled(),
    "frozen": gc.get_freeze_count() > 0,
}))
"""


def _probe(prepare: str = "") -> dict[str, bool]:
    code = PROBE.replace("{prepare}", prepare)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_import_runs_in_a_thread_without_collection_and_freezes_the_heap() -> None:
    seen = _probe()
    assert seen == {
        "thread": True,
        "same": True,  # three leases at once: one import, every caller the whole module
        "gc_after": True,
        "frozen": True,
    }


def test_collection_stays_off_when_the_process_had_turned_it_off() -> None:
    seen = _probe("gc.disable()")
    assert seen["same"] and not seen["gc_after"]  # what the process chose is kept


LEASES = """
import asyncio, json, threading, time
from jobset_core.observe import _shared

calls = []

def counted():
    calls.append(threading.current_thread().name)
    time.sleep(0.2)  # long enough for every lease below to come while it runs
    return real()

real, _shared._import_client = _shared._import_client, counted

async def lease():
    registry = _shared._registry()
    return await _shared._client_module(registry)

async def main():
    loser = asyncio.ensure_future(lease())
    await asyncio.sleep(0)
    loser.cancel()  # the first lease gives up: the import goes on for the others
    modules = await asyncio.gather(*(lease() for _ in range(200)))
    later = await lease()  # imported: no thread at all
    return modules + [later], _shared._registry().importing

modules, pending = asyncio.run(main())
print(json.dumps({
    "imports": len(calls),
    "same": len({id(m) for m in modules}) == 1 and hasattr(modules[0], "Client"),
    "pending": pending is not None,
}))
"""


def test_leases_that_come_together_share_one_import() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LEASES], capture_output=True, text=True, check=True, timeout=120
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    # A triggerer starting a thousand triggers sent each to a worker thread of its own to
    # wait on the import lock (0.5-0.8 s of the loop's start-up at 1,000 triggers).
    assert seen == {"imports": 1, "same": True, "pending": False}
