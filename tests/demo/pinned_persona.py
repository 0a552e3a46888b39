"""A persona whose noise is pinned, so that each case has one outcome; and a style it keeps."""

from demo.domain import Style
from demo.personas import Delays, Noise, Persona

NO_NOISE = Noise(interrupt=0.0, revert_when_satisfied=0.0, persist_when_soft_miss=0.0,
                 followup_after_required_miss=1.0, followup_after_clear_ask=1.0)
DELAYS = Delays(followup=(10.0, 20.0), clarification=(30.0, 40.0), settle=(1000.0, 2000.0), outcome=(5000.0, 6000.0))
# Wants snake_case for sure, and would rather keep code with docstrings.
STRICT = Persona(name="strict", description="pinned noise", required={"naming": "snake"}, soft={"docstring": "yes"},
                 noise=NO_NOISE, delays=DELAYS)
PLEASING = Style(naming="snake", indent="4", docstring="yes", hints="no")
