"""perfkit.lab from a thread that runs an asyncio loop, as a Jupyter kernel's main
thread does: pyroute2 refuses to run inside a loop, so the lab moves its netlink work
to a helper thread."""
import asyncio

import pytest

from perfkit.lab import Lab


@pytest.mark.root
def test_lab_up_impair_down_inside_a_running_event_loop():
    async def notebook_cell():
        lab = Lab().up()
        name = lab.name
        try:
            assert len(lab.hosts) == 2
            lab.impair(0, loss="1%")
            assert lab.impairments[0].loss == 1.0
        finally:
            lab.down()
        return name

    assert asyncio.run(notebook_cell())
