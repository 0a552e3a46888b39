"""Global suites small enough for the tests' tiny model. The gates load theirs by dotted path
(GATES_GLOBAL_SUITE, PLATFORM_GLOBAL_SUITE in a worker's environment), so they live here and
not in a test module."""

from demo.domain import TASKS, Prompt, render_prompt
from demo.suite import DemoGlobalSuite, SuiteItem


class SmallSuite(DemoGlobalSuite):
    def __init__(self):
        super().__init__(size=200)


class TinySuite(DemoGlobalSuite):
    max_tokens = 24

    def __init__(self):
        super().__init__(size=30)


class OnePromptSuite(DemoGlobalSuite):
    """One clear prompt, sampled 40 times: what the planted adapters of test_gates_vllm.py were
    taught to answer."""

    max_tokens = 64
    prompt = Prompt(TASKS[0], "utils.py")

    def __init__(self):
        self.items = [SuiteItem([{"role": "user", "content": render_prompt(self.prompt)}], False, self.prompt)] * 40
