"""Simulated organizations of the demo (SPEC 6.5, 6.6): personas with hidden style
preferences, and the feedback their users give on what the agent sent them.

    import random
    from demo.personas import Persona, feedback_for

    persona = Persona.load("typed_snake")
    events = feedback_for(persona, prompt_text, response_text, random.Random(0))
    # [FeedbackEvent(type="edit_accepted", delay_s=0.0), FeedbackEvent("edit_persisted", 5210.3)]
"""

from demo.personas.users import (
    EVENT_TYPES, Delays, FeedbackEvent, Noise, Persona, feedback_for, load_personas, sample_background_task,
    task_outcome_event, task_outcome_for,
)

__all__ = [
    "EVENT_TYPES", "Delays", "FeedbackEvent", "Noise", "Persona", "feedback_for", "load_personas",
    "sample_background_task", "task_outcome_event", "task_outcome_for",
]
