"""A reference agent that thinks for a while each turn, so a batch can be killed half-way."""

import os
import time

from assay.agents.reference import Diligent

PAUSE = float(os.environ.get("ASSAY_TEST_PAUSE", "0.05"))


class SlowDiligent(Diligent):
    def __call__(self, messages, tools):  # noqa: ANN001, ANN204
        time.sleep(PAUSE)
        return super().__call__(messages, tools)
