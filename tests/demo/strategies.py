"""Hypothesis strategies over the demo domain's catalogue and styles."""

from hypothesis import strategies as st

from demo.domain import DIMENSIONS, FILES, TASKS, Style

tasks = st.sampled_from(TASKS)
files = st.sampled_from(FILES)
styles = st.builds(Style, **{name: st.sampled_from(values) for name, values in DIMENSIONS.items()})
