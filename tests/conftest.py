"""Hypothesis profiles: ``default`` for the normal run (derandomized: the same examples on
every run, so CI is reproducible), ``thorough`` for long random soak runs
(``HYPOTHESIS_PROFILE=thorough pytest tests/solver/test_evaluate_property.py``). Cases a soak run
finds become explicit tests."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
